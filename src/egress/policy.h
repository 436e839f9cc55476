/* policy.h -- the egress policy of a sandbox: parsing and validating its JSON (the
 * daemon validates what clients send; the gateway parses what the daemon sends it) and
 * matching names, addresses and ports against it. Pure logic, no I/O. Format and semantics:
 * docs/design/egress.md. */
#ifndef SPACE_EGRESS_POLICY_H
#define SPACE_EGRESS_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define EGRESS_MAX_ENTRIES 256
#define EGRESS_MAX_INJECT 32
#define EGRESS_NAME_MAX 253
#define EGRESS_SECRET_NAME_MAX 64
#define EGRESS_SECRET_VALUE_MAX 8192

/* EGRESS_ANY: the allow entry "*" (or "*:port"): every name of at least two labels, still
 * checked like any name rule (its addresses must have been handed out for it by the gateway's
 * DNS). Never an inject host or a secret's binding. */
enum egress_kind { EGRESS_NAME, EGRESS_WILDCARD, EGRESS_CIDR, EGRESS_ANY };

struct egress_entry {
	enum egress_kind kind;
	char name[EGRESS_NAME_MAX + 1]; /* NAME: the name; WILDCARD: the suffix without "*."; ANY: "" */
	uint32_t addr, mask;            /* CIDR, host byte order */
	uint16_t port;                  /* 0: every port */
	bool tls_passthrough;           /* allow only: TLS it allows is relayed untouched, never
					 * terminated (`{"name": ..., "tls": "passthrough"}`) */
	char text[EGRESS_NAME_MAX + 16]; /* as written (normalised), for reasons */
};

struct egress_inject {
	struct egress_entry host;       /* NAME or WILDCARD, port 0 */
	char header[64];
	char secret[EGRESS_SECRET_NAME_MAX + 1];
	char *prefix;                   /* "" if none */
	char *value;                    /* gateway side: prefix + secret value; NULL if not resolved */
	bool plain_http;
};

struct egress_policy {
	struct egress_entry *allow;
	int nallow;
	struct egress_entry *deny;
	int ndeny;
	struct egress_inject *inject;
	int ninject;
};

/* Parses and validates a policy object. with_values: inject rules may carry "value" (what the
 * daemon sends the gateway); clients may not send it. NULL or JSON null = deny-all (an empty
 * policy). On error: -1, err says which entry and why ("allow[2]: bad CIDR ..."). */
int egress_policy_parse(const json_t *j, bool with_values, struct egress_policy **out, space_err *err);
void egress_policy_free(struct egress_policy *p);

/* The policy as normalised JSON (no values unless with_values). New reference. */
json_t *egress_policy_json(const struct egress_policy *p, bool with_values);

/* Names: lower-case, no trailing dot, labels of [a-z0-9-_] 1..63, total <= 253. Writes the
 * normalised form; false if invalid. */
bool egress_name_normalise(const char *in, char out[EGRESS_NAME_MAX + 1]);

/* A decision and the entry that made it ("allowed by pypi.org:443", "denied by evil.com",
 * "not allowed"); passthrough: the allow entry says "tls": "passthrough"; any_name: the
 * allow entry was "*" (the name is allowed only as one of every name: the gateway hands out
 * none of its addresses that it would refuse). */
struct egress_verdict {
	bool allow;
	bool passthrough;
	bool any_name;
	char reason[EGRESS_NAME_MAX + 48];
};

/* Is connecting to (or resolving, port 0 = any port) name allowed? Deny entries matching the
 * name (and port) win; then allow entries matching name and port, a named one (exact or
 * wildcard) before "*" so that the reason names the most specific entry. */
struct egress_verdict egress_check_name(const struct egress_policy *p, const char *name, uint16_t port);
/* Is the address allowed by a CIDR entry (and not denied by one)? */
struct egress_verdict egress_check_addr(const struct egress_policy *p, uint32_t addr, uint16_t port);
/* Does any allow entry name `name` with an explicit port equal to `port`? (opaque TCP to a name) */
bool egress_name_has_port(const struct egress_policy *p, const char *name, uint16_t port);
/* The inject rules for a host name, in order (NULL-terminated array into p, at most
 * EGRESS_MAX_INJECT + 1 long), written to out; returns how many. */
int egress_injects_for(const struct egress_policy *p, const char *name,
		       const struct egress_inject *out[EGRESS_MAX_INJECT + 1]);

/* Address blocks the gateway never connects to unless a CIDR entry names them explicitly:
 * 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.168/16, 224/4, 240/4. */
bool egress_addr_reserved(uint32_t addr);
/* Does an allow CIDR entry explicitly contain addr (for a reserved address)? */
bool egress_cidr_names(const struct egress_policy *p, uint32_t addr, uint16_t port);

/* A comma-separated list of IPv4 CIDRs without ports ("10.244.0.0/16,10.96.0.0/12"; a bare
 * address is a /32), at most EGRESS_REFUSE_MAX, for the addresses a node's gateways refuse
 * whatever a policy allows (spaced --egress-refuse). "" is an empty list. -1 with err naming
 * the entry. */
#define EGRESS_REFUSE_MAX 64
struct egress_cidrs {
	struct egress_entry e[EGRESS_REFUSE_MAX];
	int n;
};
int egress_cidrs_parse(const char *text, struct egress_cidrs *out, space_err *err);
/* The entry of the list that contains addr, or NULL. */
const struct egress_entry *egress_cidrs_match(const struct egress_cidrs *l, uint32_t addr);

/* Secret names: [A-Za-z0-9_.-]{1,64}. Values: 1..EGRESS_SECRET_VALUE_MAX bytes, no CR, LF, NUL. */
bool egress_secret_name_valid(const char *name);
bool egress_secret_value_valid(const char *value, size_t len);

#endif
