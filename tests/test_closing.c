/*
 * Unit test of the closing phase's rules (closing.h): which one ends the
 * phase, in which order, and that the distance covers every live partner.
 */
#include <string.h>

#include "check.h"
#include "closing.h"

static const struct closing_params params = { 1000, 0.01, 60 };

static void
test_rules(void)
{
	struct closing c;
	json_t *o;

	/* Nothing measured: not before the budget, the timeout or alone. */
	closing_begin(&c, &params, 100, 1.7e9, 5000);
	o = closing_json(&c, 100);
	CHECK(o != NULL && json_is_null(json_object_get(o, "distance")) &&
	    json_object_get(o, "reason") == NULL);
	json_decref(o);
	CHECK(closing_check(&c, 101, 5999, 3) == CLOSING_NONE);
	CHECK(closing_check(&c, 101, 6000, 3) == CLOSING_BUDGET);
	CHECK(closing_check(&c, 101, 5000, 0) == CLOSING_ALONE);
	CHECK(closing_check(&c, 160, 5000, 3) == CLOSING_TIMEOUT);

	/* Three close samples are too few to trust. */
	for (int i = 0; i < 3; i++)
		closing_exchange(&c, 1, 0.001, 0);
	CHECK(closing_check(&c, 101, 5000, 3) == CLOSING_NONE);
	closing_exchange(&c, 0, -1, 0);
	CHECK(c.failed == 1 && c.exchanges == 3);
	closing_exchange(&c, 1, 0.005, 0);
	CHECK(closing_check(&c, 101, 5000, 3) == CLOSING_DISTANCE);
	/* Distance comes first when the budget is spent too. */
	CHECK(closing_check(&c, 101, 9000, 3) == CLOSING_DISTANCE);

	/* With 6 live partners the last 6 count: a far one among them holds. */
	closing_begin(&c, &params, 100, 1.7e9, 0);
	closing_exchange(&c, 1, 0.5, 0);
	for (int i = 0; i < 5; i++)
		closing_exchange(&c, 1, 0.001, 0);
	CHECK(closing_check(&c, 101, 0, 6) == CLOSING_NONE);
	CHECK(c.distance == 0.5);
	CHECK(closing_check(&c, 101, 0, 4) == CLOSING_DISTANCE);

	/* A close partner that is still training is no agreement: the rule
	 * waits until the window has passed it, and status shows no number. */
	closing_begin(&c, &params, 100, 1.7e9, 0);
	for (int i = 0; i < 3; i++)
		closing_exchange(&c, 1, 0.001, 0);
	closing_exchange(&c, 1, 0.001, 1);
	CHECK(closing_check(&c, 101, 0, 3) == CLOSING_NONE);
	o = closing_json(&c, 101);
	CHECK(o != NULL && json_is_null(json_object_get(o, "distance")));
	json_decref(o);
	for (int i = 0; i < 3; i++)
		closing_exchange(&c, 1, 0.001, 0);
	CHECK(closing_check(&c, 101, 0, 3) == CLOSING_NONE);
	closing_exchange(&c, 1, 0.001, 0);
	CHECK(closing_check(&c, 101, 0, 3) == CLOSING_DISTANCE);

	/* Partners in turn. */
	CHECK(closing_next_partner(&c, 3) == 0 && closing_next_partner(&c, 3) == 1 &&
	    closing_next_partner(&c, 3) == 2 && closing_next_partner(&c, 3) == 0);

	/* Ended: the reason in status. */
	closing_end(&c, 130, 700, CLOSING_LEAVE);
	CHECK(!c.active && c.ended && c.bytes == 700);
	o = closing_json(&c, 200);
	CHECK(o != NULL && strcmp(json_string_value(json_object_get(o, "reason")), "leave") == 0);
	CHECK(json_real_value(json_object_get(o, "seconds")) == 30);
	json_decref(o);
	memset(&c, 0, sizeof(c));
	CHECK(closing_json(&c, 0) == NULL);
}

static const struct check_case cases[] = {
	{ "closing_rules", test_rules },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_closing");
}
