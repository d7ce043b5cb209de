/*
 * cblas_ref: a plain-C cblas_sgemm (row-major only) and a no-op
 * openblas_set_num_threads, for contrib/bench/cuda.sh to link the CPU
 * backend into tests/test_cuda on a GPU machine that has no BLAS headers.
 * It is the reference the GPU is checked against there, so it favours
 * obviousness over speed; it is never part of gossipd itself.
 * cuda.sh writes the matching cblas.h next to it.
 */
#include <stddef.h>

#include "cblas.h"

void
openblas_set_num_threads(int n)
{
	(void)n;
}

/* C <- alpha * op(A) * op(B) + beta * C, all row-major. */
void
cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta,
    enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float *a,
    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	(void)order;
	for (int i = 0; i < m; i++) {
		float *ci = c + (size_t)i * ldc;

		for (int j = 0; j < n; j++)
			ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
		if (tb == CblasNoTrans) {
			for (int p = 0; p < k; p++) {
				float aip = alpha * (ta == CblasNoTrans ?
				    a[(size_t)i * lda + p] : a[(size_t)p * lda + i]);
				const float *bp = b + (size_t)p * ldb;

				for (int j = 0; j < n; j++)
					ci[j] += aip * bp[j];
			}
		} else {
			for (int j = 0; j < n; j++) {
				const float *bj = b + (size_t)j * ldb;
				float s = 0.0f;

				for (int p = 0; p < k; p++)
					s += (ta == CblasNoTrans ?
					    a[(size_t)i * lda + p] :
					    a[(size_t)p * lda + i]) * bj[p];
				ci[j] += alpha * s;
			}
		}
	}
}
