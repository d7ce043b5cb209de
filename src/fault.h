/*
 * fault: the faulty member a test build's peer can be (--fault
 * KIND[:X]), so that tests/robust.sh and contrib/bench/robust.sh run
 * faulty members made of the real daemon rather than a patched copy. It
 * rewrites the values this peer sends, nothing else: the peer still
 * trains, probes, answers and counts as any other. Only tests/gossipd_faulty
 * is built with it (GOSSIPD_FAULTS); the installed gossipd has no such
 * option.
 *
 * Kinds (X's default in brackets):
 *   bitflip:P   one random bit of each value flipped with probability P
 *               (1e-4): silent data corruption
 *   scale:K     values times K (1000); scale:0 sends a zeroed model
 *   signflip    what it learnt since it started, negated: 2 x0 - x,
 *               with x0 the model it started from (the job's start
 *               model, or the one it pulled)
 *   stale       x0 for ever: a free-rider that never trains
 *   alie:Z      "a little is enough" (Baruch et al. 2019): values shifted
 *               by Z times the consensus distance, all in one sign
 *               pattern over the coordinates that every alie member
 *               shares (1)
 */
#ifndef GD_FAULT_H
#define GD_FAULT_H

struct fault;
struct rounds;
struct errbuf;

/* spec is KIND or KIND:X; -EINVAL with err naming the key otherwise. */
int fault_parse(const char *spec, struct fault **out, struct errbuf *err);
/* From now on the values r's exchanges send go through f. */
void fault_attach(struct fault *f, struct rounds *r);
void fault_free(struct fault *f);

#endif
