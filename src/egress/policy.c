/* policy.c -- the egress policy: parsing, validation, normalisation and matching (policy.h,
 * docs/design/egress.md). Pure logic: no I/O, no globals. */
#include "egress/policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names, ports, addresses ---- */

bool egress_name_normalise(const char *in, char out[EGRESS_NAME_MAX + 1])
{
	size_t n = in ? strlen(in) : 0, label = 0;

	if (n && in[n - 1] == '.')
		n--;
	if (n == 0 || n > EGRESS_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = (char)tolower((unsigned char)in[i]);

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
		out[i] = c;
	}
	out[n] = '\0';
	return label > 0;
}

/* "443" -> 443; digits only, 1..65535. */
static bool parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

/* Dotted quad, each part 0..255 without leading zeros (no octal ambiguity). */
static bool parse_ipv4(const char *s, uint32_t *addr)
{
	uint32_t a = 0;
	int parts = 0;

	while (parts < 4) {
		unsigned v = 0;
		int digits = 0;

		while (*s >= '0' && *s <= '9') {
			v = v * 10 + (unsigned)(*s++ - '0');
			if (++digits > 3 || v > 255)
				return false;
		}
		if (digits == 0 || (digits > 1 && s[-digits] == '0'))
			return false;
		a = a << 8 | v;
		parts++;
		if (parts < 4 && *s++ != '.')
			return false;
	}
	if (*s)
		return false;
	*addr = a;
	return true;
}

static uint32_t prefix_mask(int len)
{
	return len == 0 ? 0 : 0xffffffffu << (32 - len);
}

static int mask_len(uint32_t mask)
{
	return __builtin_popcount(mask);
}

static void addr_text(uint32_t a, char *out, size_t len)
{
	snprintf(out, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* Does the text look like an address (digits, dots, a slash)? Then it is parsed as one, so
 * "10.0.0.1/33" is a bad CIDR rather than a bad name. */
static bool looks_numeric(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == '/'))
			return false;
	return true;
}

/* ---- one entry ---- */

static int parse_cidr(const char *s, struct egress_entry *e, const char *what, space_err *err)
{
	char buf[EGRESS_NAME_MAX + 1];
	const char *slash = strchr(s, '/');
	int len = 32;

	snprintf(buf, sizeof(buf), "%.*s", slash ? (int)(slash - s) : (int)strlen(s), s);
	if (!parse_ipv4(buf, &e->addr))
		return err_set(err, EINVAL, "%s: bad CIDR \"%s\": not an IPv4 address", what, s);
	if (slash) {
		const char *p = slash + 1;

		if (!*p || strlen(p) > 2 || strspn(p, "0123456789") != strlen(p) || atoi(p) > 32 ||
		    (p[0] == '0' && p[1]))
			return err_set(err, EINVAL, "%s: bad CIDR \"%s\": prefix length must be 0..32", what, s);
		len = atoi(p);
	}
	e->mask = prefix_mask(len);
	if (e->addr & ~e->mask)
		return err_set(err, EINVAL, "%s: bad CIDR \"%s\": host bits set", what, s);
	e->kind = EGRESS_CIDR;
	addr_text(e->addr, buf, sizeof(buf));
	if (len == 32)
		snprintf(e->text, sizeof(e->text), "%s", buf);
	else
		snprintf(e->text, sizeof(e->text), "%s/%d", buf, len);
	return 0;
}

static int parse_host(const char *s, struct egress_entry *e, const char *what, space_err *err)
{
	bool wild = strncmp(s, "*.", 2) == 0;

	if (!egress_name_normalise(wild ? s + 2 : s, e->name))
		return err_set(err, EINVAL, "%s: bad %s \"%s\"", what, wild ? "wildcard" : "name", s);
	e->kind = wild ? EGRESS_WILDCARD : EGRESS_NAME;
	snprintf(e->text, sizeof(e->text), "%s%s", wild ? "*." : "", e->name);
	return 0;
}

/* "name", "*.suffix", "a.b.c.d[/n]", "*" (every name), each with an optional ":port". */
static int parse_entry(const char *s, struct egress_entry *e, const char *what, space_err *err)
{
	char body[EGRESS_NAME_MAX + 16];
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	memset(e, 0, sizeof(*e));
	if (n == 0 || n > EGRESS_NAME_MAX + 3)
		return err_set(err, EINVAL, "%s: bad entry \"%.300s\": empty or too long", what, s);
	if (colon && !parse_port(colon + 1, &e->port))
		return err_set(err, EINVAL, "%s: bad port in \"%.300s\" (1..65535)", what, s);
	memcpy(body, s, n);
	body[n] = '\0';
	if (strcmp(body, "*") == 0) {
		e->kind = EGRESS_ANY;
		snprintf(e->text, sizeof(e->text), "*");
	} else if ((looks_numeric(body) ? parse_cidr(body, e, what, err) : parse_host(body, e, what, err)) < 0)
		return -1;
	if (e->port) {
		size_t t = strlen(e->text);

		snprintf(e->text + t, sizeof(e->text) - t, ":%u", e->port);
	}
	return 0;
}

/* An allow entry as an object: {"name": ENTRY, "tls": "passthrough" | "intercept"}. Only the
 * allow list has them: passthrough weakens what an entry allows (the gateway then sees no
 * request inside TLS), which a deny never needs. */
static int parse_entry_object(const json_t *o, struct egress_entry *e, const char *what, space_err *err)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const json_t *tls = json_object_get(o, "tls");
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		if (strcmp(k, "name") && strcmp(k, "tls"))
			return err_set(err, EINVAL, "%s: unknown key \"%.64s\" (name, tls)", what, k);
	}
	if (!name)
		return err_set(err, EINVAL, "%s.name: missing or not a string", what);
	if (tls && !json_is_null(tls) &&
	    (!json_is_string(tls) || (strcmp(json_string_value(tls), "passthrough") &&
				     strcmp(json_string_value(tls), "intercept"))))
		return err_set(err, EINVAL, "%s.tls: must be \"passthrough\" or \"intercept\"", what);
	if (parse_entry(name, e, what, err) < 0)
		return -1;
	e->tls_passthrough = json_is_string(tls) && strcmp(json_string_value(tls), "passthrough") == 0;
	return 0;
}

static int parse_list(const json_t *j, const char *key, struct egress_entry **out, int *count,
		      space_err *err)
{
	const json_t *arr = json_object_get(j, key);
	size_t i;
	json_t *v;

	*out = NULL;
	*count = 0;
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return err_set(err, EINVAL, "%s: not an array", key);
	if (json_array_size(arr) > EGRESS_MAX_ENTRIES)
		return err_set(err, E2BIG, "%s: more than %d entries", key, EGRESS_MAX_ENTRIES);
	*out = calloc(json_array_size(arr) + 1, sizeof(**out));
	if (!*out)
		return err_set(err, ENOMEM, "%s: out of memory", key);
	json_array_foreach(arr, i, v) {
		char what[32];

		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		if (json_is_object(v) && strcmp(key, "allow") == 0) {
			if (parse_entry_object(v, &(*out)[i], what, err) < 0)
				return -1;
		} else if (!json_is_string(v)) {
			return err_set(err, EINVAL, "%s: not a string%s", what,
				       strcmp(key, "allow") == 0 ? " or an object" : "");
		} else if (parse_entry(json_string_value(v), &(*out)[i], what, err) < 0) {
			return -1;
		}
		(*count)++;
	}
	return 0;
}

/* ---- inject rules ---- */

static bool header_token_valid(const char *h)
{
	static const char *const forbidden[] = { "host", "content-length", "transfer-encoding",
						 "connection" };
	size_t n = strlen(h);

	if (n == 0 || n > 63)
		return false;
	if (strspn(h, "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
		      "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != n)
		return false;
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		if (strcasecmp(h, forbidden[i]) == 0)
			return false;
	return true;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

bool egress_secret_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n >= 1 && n <= EGRESS_SECRET_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

bool egress_secret_value_valid(const char *value, size_t len)
{
	if (!value || len == 0 || len > EGRESS_SECRET_VALUE_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (value[i] == '\r' || value[i] == '\n' || value[i] == '\0')
			return false;
	return true;
}

static const char *const inject_keys[] = { "host", "header", "secret", "prefix", "value",
					   "plain_http" };

static int check_inject_keys(const json_t *o, bool with_values, const char *what, space_err *err)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		bool known = false;

		for (size_t i = 0; i < sizeof(inject_keys) / sizeof(inject_keys[0]); i++)
			known |= strcmp(k, inject_keys[i]) == 0;
		if (!known || (!with_values && strcmp(k, "value") == 0))
			return err_set(err, EINVAL, "%s: unknown key \"%.64s\"", what, k);
	}
	return 0;
}

static int parse_inject_host(const json_t *o, struct egress_inject *r, const char *what, space_err *err)
{
	const char *host = json_string_value(json_object_get(o, "host"));

	if (!host)
		return err_set(err, EINVAL, "%s.host: missing or not a string", what);
	if (strchr(host, ':') || looks_numeric(host))
		return err_set(err, EINVAL, "%s.host: \"%.300s\" must be a name or *.suffix without a port",
			       what, host);
	return parse_host(host, &r->host, what, err);
}

static int parse_inject_value(const json_t *o, struct egress_inject *r, const char *what, space_err *err)
{
	const json_t *v = json_object_get(o, "value");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) ||
	    !egress_secret_value_valid(json_string_value(v), json_string_length(v)) ||
	    json_string_length(v) > EGRESS_SECRET_VALUE_MAX + 256)
		return err_set(err, EINVAL, "%s.value: not a valid header value", what);
	r->value = strdup(json_string_value(v));
	return r->value ? 0 : err_set(err, ENOMEM, "%s: out of memory", what);
}

static int parse_inject(const json_t *o, bool with_values, struct egress_inject *r, const char *what,
			space_err *err)
{
	const char *header = json_string_value(json_object_get(o, "header"));
	const char *secret = json_string_value(json_object_get(o, "secret"));
	const json_t *prefix = json_object_get(o, "prefix"), *plain = json_object_get(o, "plain_http");

	if (!json_is_object(o))
		return err_set(err, EINVAL, "%s: not an object", what);
	if (check_inject_keys(o, with_values, what, err) < 0 || parse_inject_host(o, r, what, err) < 0)
		return -1;
	if (!header || !header_token_valid(header))
		return err_set(err, EINVAL, "%s.header: missing, not an HTTP token, or not allowed "
			       "(Host, Content-Length, Transfer-Encoding, Connection)", what);
	snprintf(r->header, sizeof(r->header), "%s", header);
	if (!egress_secret_name_valid(secret))
		return err_set(err, EINVAL, "%s.secret: missing or not [A-Za-z0-9_.-]{1,64}", what);
	snprintf(r->secret, sizeof(r->secret), "%s", secret);
	if (prefix && !json_is_null(prefix) &&
	    (!json_is_string(prefix) || json_string_length(prefix) > 256 ||
	     strlen(json_string_value(prefix)) != json_string_length(prefix) ||
	     !printable(json_string_value(prefix))))
		return err_set(err, EINVAL, "%s.prefix: not printable text of at most 256 bytes", what);
	r->prefix = strdup(json_is_string(prefix) ? json_string_value(prefix) : "");
	if (!r->prefix)
		return err_set(err, ENOMEM, "%s: out of memory", what);
	if (plain && !json_is_boolean(plain))
		return err_set(err, EINVAL, "%s.plain_http: not a boolean", what);
	r->plain_http = json_is_true(plain);
	return parse_inject_value(o, r, what, err);
}

static int parse_injects(const json_t *j, bool with_values, struct egress_policy *p, space_err *err)
{
	const json_t *arr = json_object_get(j, "inject");
	size_t i;
	json_t *v;

	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return err_set(err, EINVAL, "inject: not an array");
	if (json_array_size(arr) > EGRESS_MAX_INJECT)
		return err_set(err, E2BIG, "inject: more than %d rules", EGRESS_MAX_INJECT);
	p->inject = calloc(json_array_size(arr) + 1, sizeof(*p->inject));
	if (!p->inject)
		return err_set(err, ENOMEM, "inject: out of memory");
	json_array_foreach(arr, i, v) {
		char what[32];

		snprintf(what, sizeof(what), "inject[%zu]", i);
		p->ninject++; /* counted first, so a half-parsed rule is freed too */
		if (parse_inject(v, with_values, &p->inject[i], what, err) < 0)
			return -1;
	}
	return 0;
}

/* ---- the policy ---- */

static int check_policy_keys(const json_t *j, space_err *err)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)j, k, v) {
		if (strcmp(k, "allow") && strcmp(k, "deny") && strcmp(k, "inject"))
			return err_set(err, EINVAL, "unknown key \"%.64s\" (allow, deny, inject)", k);
	}
	return 0;
}

int egress_policy_parse(const json_t *j, bool with_values, struct egress_policy **out, space_err *err)
{
	struct egress_policy *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return err_set(err, ENOMEM, "policy: out of memory");
	if (j && !json_is_null(j)) {
		if (!json_is_object(j)) {
			egress_policy_free(p);
			return err_set(err, EINVAL, "policy: not an object");
		}
		if (check_policy_keys(j, err) < 0 || parse_list(j, "allow", &p->allow, &p->nallow, err) < 0 ||
		    parse_list(j, "deny", &p->deny, &p->ndeny, err) < 0 ||
		    parse_injects(j, with_values, p, err) < 0) {
			egress_policy_free(p);
			return -1;
		}
	}
	*out = p;
	return 0;
}

void egress_policy_free(struct egress_policy *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->ninject; i++) {
		free(p->inject[i].prefix);
		if (p->inject[i].value) {
			explicit_bzero(p->inject[i].value, strlen(p->inject[i].value));
			free(p->inject[i].value);
		}
	}
	free(p->inject);
	free(p->allow);
	free(p->deny);
	free(p);
}

/* Entries as strings; one marked passthrough as {"name", "tls"} (interception is the default,
 * so "intercept" is never shown). */
static json_t *list_json(const struct egress_entry *e, int n)
{
	json_t *a = json_array();

	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, e[i].tls_passthrough
						 ? json_pack("{s:s, s:s}", "name", e[i].text, "tls", "passthrough")
						 : json_string(e[i].text));
	return a;
}

static json_t *inject_json(const struct egress_inject *r, bool with_values)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "host", r->host.text, "header", r->header,
			      "secret", r->secret);

	if (o && r->prefix && r->prefix[0])
		json_object_set_new(o, "prefix", json_string(r->prefix));
	if (o && r->plain_http)
		json_object_set_new(o, "plain_http", json_true());
	if (o && with_values && r->value)
		json_object_set_new(o, "value", json_string(r->value));
	return o;
}

json_t *egress_policy_json(const struct egress_policy *p, bool with_values)
{
	json_t *o = json_object(), *inj = json_array();

	if (!o || !inj) {
		json_decref(o);
		json_decref(inj);
		return NULL;
	}
	json_object_set_new(o, "allow", list_json(p ? p->allow : NULL, p ? p->nallow : 0));
	json_object_set_new(o, "deny", list_json(p ? p->deny : NULL, p ? p->ndeny : 0));
	for (int i = 0; p && i < p->ninject; i++)
		json_array_append_new(inj, inject_json(&p->inject[i], with_values));
	json_object_set_new(o, "inject", inj);
	return o;
}

/* ---- matching ---- */

/* A name entry matches: exact, or a wildcard's suffix with at least one more label, or "*"
 * any name of two labels or more (a single label is no public name: "localhost", or a short
 * name an upstream resolver would complete with its search domains). */
static bool name_matches(const struct egress_entry *e, const char *name)
{
	size_t n, s;

	if (e->kind == EGRESS_ANY)
		return strchr(name, '.') != NULL;
	if (e->kind == EGRESS_NAME)
		return strcmp(e->name, name) == 0;
	if (e->kind != EGRESS_WILDCARD)
		return false;
	n = strlen(name);
	s = strlen(e->name);
	return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, e->name) == 0;
}

/* port 0 asks about the name as a whole (DNS): an allow entry with any port counts, a deny
 * entry only if it denies every port (denying "evil.com:80" must not hide evil.com:443). */
static bool port_matches(const struct egress_entry *e, uint16_t port, bool deny)
{
	if (port == 0)
		return deny ? e->port == 0 : true;
	return e->port == 0 || e->port == port;
}

/* e: the entry that decided (NULL: none did, "not allowed"). */
static struct egress_verdict verdict(bool allow, const char *how, const struct egress_entry *e)
{
	struct egress_verdict v = { .allow = allow, .passthrough = allow && e && e->tls_passthrough };

	v.any_name = allow && e && e->kind == EGRESS_ANY;
	if (e)
		snprintf(v.reason, sizeof(v.reason), "%s by %s", how, e->text);
	else
		snprintf(v.reason, sizeof(v.reason), "not allowed");
	return v;
}

struct egress_verdict egress_check_name(const struct egress_policy *p, const char *name, uint16_t port)
{
	for (int i = 0; p && i < p->ndeny; i++)
		if (name_matches(&p->deny[i], name) && port_matches(&p->deny[i], port, true))
			return verdict(false, "denied", &p->deny[i]);
	/* pass 0: the entries that name it; pass 1: "*" */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; p && i < p->nallow; i++)
			if ((p->allow[i].kind == EGRESS_ANY) == (pass == 1) && name_matches(&p->allow[i], name) &&
			    port_matches(&p->allow[i], port, false))
				return verdict(true, "allowed", &p->allow[i]);
	return verdict(false, NULL, NULL);
}

static bool cidr_contains(const struct egress_entry *e, uint32_t addr)
{
	return e->kind == EGRESS_CIDR && (addr & e->mask) == e->addr;
}

struct egress_verdict egress_check_addr(const struct egress_policy *p, uint32_t addr, uint16_t port)
{
	for (int i = 0; p && i < p->ndeny; i++)
		if (cidr_contains(&p->deny[i], addr) && port_matches(&p->deny[i], port, true))
			return verdict(false, "denied", &p->deny[i]);
	for (int i = 0; p && i < p->nallow; i++)
		if (cidr_contains(&p->allow[i], addr) && port_matches(&p->allow[i], port, false))
			return verdict(true, "allowed", &p->allow[i]);
	return verdict(false, NULL, NULL);
}

bool egress_name_has_port(const struct egress_policy *p, const char *name, uint16_t port)
{
	for (int i = 0; p && i < p->nallow; i++)
		if (p->allow[i].port && p->allow[i].port == port && name_matches(&p->allow[i], name))
			return true;
	return false;
}

int egress_injects_for(const struct egress_policy *p, const char *name,
		       const struct egress_inject *out[EGRESS_MAX_INJECT + 1])
{
	int n = 0;

	for (int i = 0; p && i < p->ninject && n < EGRESS_MAX_INJECT; i++)
		if (name_matches(&p->inject[i].host, name))
			out[n++] = &p->inject[i];
	out[n] = NULL;
	return n;
}

static const struct {
	uint32_t addr, mask;
} reserved[] = {
	{ 0x00000000u, 0xff000000u }, /* 0/8 */
	{ 0x0a000000u, 0xff000000u }, /* 10/8 */
	{ 0x64400000u, 0xffc00000u }, /* 100.64/10 */
	{ 0x7f000000u, 0xff000000u }, /* 127/8 */
	{ 0xa9fe0000u, 0xffff0000u }, /* 169.254/16 */
	{ 0xac100000u, 0xfff00000u }, /* 172.16/12 */
	{ 0xc0a80000u, 0xffff0000u }, /* 192.168/16 */
	{ 0xe0000000u, 0xf0000000u }, /* 224/4 */
	{ 0xf0000000u, 0xf0000000u }, /* 240/4 */
};

static int reserved_block(uint32_t addr)
{
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if ((addr & reserved[i].mask) == reserved[i].addr)
			return (int)i;
	return -1;
}

bool egress_addr_reserved(uint32_t addr)
{
	return reserved_block(addr) >= 0;
}

/* "Explicitly": the allow CIDR lies inside the reserved block holding addr (so 0.0.0.0/0 or
 * 0.0.0.0/1 open none of them); for an address outside the blocks (one of the host's own) only
 * the address itself, /32. A deny CIDR still wins. */
bool egress_cidr_names(const struct egress_policy *p, uint32_t addr, uint16_t port)
{
	int b = reserved_block(addr);

	if (!egress_check_addr(p, addr, port).allow)
		return false;
	for (int i = 0; p && i < p->nallow; i++) {
		const struct egress_entry *e = &p->allow[i];

		if (!cidr_contains(e, addr) || !port_matches(e, port, false))
			continue;
		if (b >= 0 ? mask_len(e->mask) >= mask_len(reserved[b].mask) : e->mask == 0xffffffffu)
			return true;
	}
	return false;
}

/* ---- refused ranges ---- */

int egress_cidrs_parse(const char *text, struct egress_cidrs *out, space_err *err)
{
	const char *p = text ? text : "";

	out->n = 0;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		char buf[EGRESS_NAME_MAX + 1], what[32];

		snprintf(what, sizeof(what), "refuse[%d]", out->n);
		if (n == 0 || n > 18)
			return err_set(err, EINVAL, "%s: \"%.*s\" is not an IPv4 CIDR", what, (int)(n > 64 ? 64 : n), p);
		if (out->n == EGRESS_REFUSE_MAX)
			return err_set(err, E2BIG, "more than %d CIDRs", EGRESS_REFUSE_MAX);
		memcpy(buf, p, n);
		buf[n] = '\0';
		memset(&out->e[out->n], 0, sizeof(out->e[0]));
		if (!looks_numeric(buf))
			return err_set(err, EINVAL, "%s: \"%s\" is not an IPv4 CIDR", what, buf);
		if (parse_cidr(buf, &out->e[out->n], what, err) < 0)
			return -1;
		out->n++;
		p += n + (comma ? 1 : 0);
		if (comma && !*p)
			return err_set(err, EINVAL, "refuse[%d]: empty", out->n);
	}
	return 0;
}

const struct egress_entry *egress_cidrs_match(const struct egress_cidrs *l, uint32_t addr)
{
	for (int i = 0; l && i < l->n; i++)
		if (cidr_contains(&l->e[i], addr))
			return &l->e[i];
	return NULL;
}
