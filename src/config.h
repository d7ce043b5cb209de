/*
 * config: every setting of a peer, from defaults, then the INI file (-c),
 * then the command line, each later source overriding the earlier. One
 * table describes each key once (name, type, range, help), and the file
 * parser, the option parser, --help and validation all read that table, so
 * a key cannot exist in one place and not the others. Errors name the key
 * and the reason; the caller exits 2.
 */
#ifndef GD_CONFIG_H
#define GD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"
#include "util.h"

enum lr_schedule { LR_COSINE, LR_STEP, LR_CONSTANT };
/* Who trains: the trainer thread on the built-in MLP, or a process that
 * attaches (gossipd-attach(7)). */
enum trainer_kind { TRAINER_BUILTIN, TRAINER_EXTERNAL };
/* Where an attached fresh job's starting model comes from (pull.h). */
enum start_rule { START_AGREE, START_OWN };
/* What steps the model: what the attached process says (SGD if it says
 * nothing), SGD, or an optimizer that divides by the gradient's running
 * size (mode share's weight, share.h). */
enum optimizer_kind { OPTIMIZER_AUTO, OPTIMIZER_SGD, OPTIMIZER_ADAPTIVE };
/* Their names, as the optimizer key and gossipd-attach(7) spell them. */
extern const char *const config_optimizer_names[3];

struct config {
	/* job and identity */
	char *config_path;
	char *job;
	uint64_t seed;
	/* transport */
	char *listen;              /* HOST:PORT, NULL = no endpoint */
	char *provider;            /* "tcp" or "verbs" */
	char *key_file;
	size_t max_message_size;
	/* membership */
	char *peers;               /* "A:P,B:P" or "@FILE", NULL = none */
	char **peer_list;          /* its addresses, parsed and checked at load */
	size_t npeers;
	char *join;                /* HOST:PORT of any member, NULL = none */
	char *metrics_listen;      /* HOST:PORT of the /metrics listener, NULL = none */
	int linger;                /* stay a member after the training budget */
	int probe_interval;        /* ms, the SWIM protocol period */
	int probe_timeout;         /* ms before indirect probes */
	int suspicion_timeout;     /* ms from suspect to dead */
	int indirect_checks;       /* members asked to probe indirectly */
	int leave_timeout;         /* ms to announce a leave */
	/* gossip (read on the loop thread only, so runtime changes are safe) */
	enum gossip_mode mode;
	enum gossip_values values;
	double density;            /* saps: fraction of the model per exchange */
	double density_start;      /* built-in trainer: density of the first exchanges */
	int mask_block;            /* saps: coordinates per mask block */
	int interval;              /* local steps between exchanges this peer starts */
	int lag;                   /* rounds an exchange may trail the trainer; 0: any */
	enum select_policy select;
	double bw_ratio;           /* adaptive: candidates >= max bandwidth / bw_ratio */
	double stale_after;        /* adaptive: seconds before an unused link is retried */
	double exchange_timeout;   /* seconds an exchange or model pull may take */
	double exchange_patience;  /* times a link's usual exchange time (rounds_patience) */
	double clip_factor;        /* trust.h: radius / median distance; 0 off */
	double outer_lr;           /* outer step (outer.h): learning rate */
	double outer_momentum;     /* its Nesterov momentum */
	int outer_interval;        /* trainer steps between outer steps */
	enum optimizer_kind optimizer; /* mode share: a share's weight in n */
	double residual_decay;     /* mode share: the residual's after a round */
	double share_sync;         /* mode share: a round's wait for the others' shares */
	enum start_rule start;     /* external trainer: one starting model, or each its own */
	double start_timeout;      /* seconds a start agreement waits for a model */
	/* closing phase (closing.h): after the training budget */
	double close_budget;       /* model sizes sent at most; 0: no closing phase */
	double close_distance;     /* relative distance of recent exchanges that ends it */
	double close_density;      /* saps: fraction of the model per closing exchange */
	double close_timeout;      /* seconds at most */
	/* control */
	char *control;             /* socket path */
	/* data */
	char *data_dir;
	unsigned shard_index, shard_count;
	struct data_partition partition;
	/* model and training */
	enum trainer_kind trainer;
	size_t shared_params;      /* external: the vector's size once announced, else 0 */
	struct model_spec model;
	char *device;
	int threads;
	int trainer_nice;          /* nice value of the trainer thread */
	double max_step_rate;      /* steps per second at most; 0 = no cap */
	int batch_size;
	double lr;
	double momentum;
	double weight_decay;
	double logit_adjust;       /* built-in trainer: tau of the loss's label-share offsets */
	enum lr_schedule lr_schedule;
	double warmup_epochs;
	double lr_step_epochs;     /* step schedule: multiply by lr_step_gamma every ... */
	double lr_step_gamma;
	int epochs;
	uint64_t max_steps;        /* 0 = no limit */
	int eval_every;            /* steps between test evaluations, 0 = each epoch */
	size_t eval_samples;       /* 0 = whole test set */
	/* checkpoints */
	char *checkpoint_dir;      /* NULL = none */
	int checkpoint_every;      /* steps, 0 = only at epoch ends and on request */
	int checkpoint_keep;
	int resume;
	/* process */
	char *log_level;
	char *log_file;
	int foreground;
};

/* Fills defaults, reads -c FILE if given, applies argv. Returns 0, 1 when
 * --help or --version was printed (caller exits 0), or -EINVAL with the
 * reason in err (caller exits 2). */
int config_load(struct config *c, int argc, char **argv, struct errbuf *err);
void config_free(struct config *c);
/* Runtime-tunable keys (gossipctl set); -EINVAL/-EPERM with reason. A
 * value that parses but breaks a cross-key rule (probe_timeout below
 * probe_interval, a density and mask_block that fit the model) is refused
 * too, and a refused set leaves the config exactly as it was. */
int config_set(struct config *c, const char *key, const char *value, struct errbuf *err);
/* --help text to stdout. */
void config_usage(const char *prog);

#endif
