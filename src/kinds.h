/*
 * kinds: the types a config holds by value that belong to the modules it
 * configures: the exchange mode and value format (gossip.h), the partner
 * policy (select.h), the data partition (data.h) and the model's shape
 * (model.h). They live here, not in those headers, so that config.h
 * includes none of them: configuration sits below the code it configures,
 * and a file that reads the config does not get the exchange code with it.
 * Each module's header includes this one, so its users see no difference.
 */
#ifndef GD_KINDS_H
#define GD_KINDS_H

/* A mode is a row of gossip_mode.c's table, which names it and gives its
 * byte on the wire. Values: in the order of the config's metavar
 * "fp32|fp16|int8|int2"; the numbers travel in REQ headers. */
enum gossip_mode { GOSSIP_SAPS, GOSSIP_DENSE, GOSSIP_DELTA, GOSSIP_SHARE, GOSSIP_MODE_N };
enum gossip_values { GOSSIP_FP32, GOSSIP_FP16, GOSSIP_INT8, GOSSIP_INT2, GOSSIP_VALUES_N };

enum select_policy { SELECT_ADAPTIVE, SELECT_RANDOM };

enum data_partition_kind { DATA_IID, DATA_DIRICHLET };
struct data_partition {
	enum data_partition_kind kind;
	double alpha;    /* dirichlet concentration */
};

#define MODEL_MAX_LAYERS 8

struct model_spec {
	int nlayers;                       /* number of weight layers */
	int sizes[MODEL_MAX_LAYERS + 1];   /* sizes[0] = inputs, sizes[nlayers] = classes */
};

#endif
