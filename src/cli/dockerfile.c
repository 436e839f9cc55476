/* dockerfile.c -- a Dockerfile turned into a template build request (see dockerfile.h).
 *
 * The text is read as Docker's parser (moby/buildkit frontend/dockerfile/parser) reads it:
 * parser directives while the file starts with them, then instructions, each its first line
 * plus the continuation lines (comment and blank ones skipped), the instruction word up to
 * the first blank.  Words are expanded as Docker's shell lexer does (quotes removed, '$'
 * substituted, the escape character escaping), with ENV values before ARG values. */
#include "dockerfile.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "dockerignore.h"

#define FLAGS_MAX 8
#define SAFE_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-"
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"

struct flag {
	char *name;
	char *value; /* NULL: --name alone */
};

struct flags {
	struct flag v[FLAGS_MAX];
	size_t n;
};

struct df {
	const char *name;
	const char *text;
	size_t len, pos;
	int lineno;          /* physical lines read */
	int line;            /* the first line of the instruction at hand */
	char esc;            /* the escape character: '\' or '`' */
	bool directives_done;
	bool seen_escape, seen_syntax, seen_check;
	const json_t *build_args;
	json_t *used;        /* build args an ARG took: name -> true */
	json_t *gargs;       /* ARGs before FROM: name -> string, or null without a value */
	json_t *args;        /* ARGs of the stage */
	json_t *env;         /* ENV so far */
	bool have_from;
	int from_line;
	char *workdir;       /* absolute, or NULL while only the base's is in force */
	json_t *from;
	char *archive;
	json_t *cmd, *entrypoint; /* string (shell form) or array (exec form) */
	json_t *steps, *meta, *expose, *labels;
	const struct flags *flags; /* the instruction's (COPY and ADD take --chown) */
	df_warn_fn warn;
	void *warn_arg;
	space_err *e;
};

/* ---- strings -------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_putc(struct sbuf *b, char c)
{
	sb_putn(b, &c, 1);
}

/* The string built (the caller frees it), "" when empty; NULL when out of memory. */
static char *sb_take(struct sbuf *b)
{
	char *p;

	if (!b->oom && !b->p)
		sb_putn(b, "", 0);
	if (b->oom) {
		free(b->p);
		p = NULL;
	} else {
		p = b->p;
	}
	memset(b, 0, sizeof(*b));
	return p;
}

static void sb_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* POSIX single quotes: 'it'\''s'. */
static void sb_quote(struct sbuf *b, const char *s)
{
	sb_putc(b, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			sb_puts(b, "'\\''");
		else
			sb_putc(b, *s);
	}
	sb_putc(b, '\'');
}

/* ---- errors and warnings -------------------------------------------- */

static int fail(struct df *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct df *d, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(d->e, EINVAL, "%s:%d: %s", d->name, d->line, msg);
}

static int oom(struct df *d)
{
	return err_set(d->e, ENOMEM, "out of memory");
}

static void warn(struct df *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct df *d, const char *fmt, ...)
{
	char msg[900], full[1000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s:%d: %s", d->name, d->line, msg);
	if (d->warn)
		d->warn(full, d->warn_arg);
}

/* ---- substitution (Docker's shell lexer) ---------------------------- */

struct lex {
	struct df *d;
	const char *s; /* what is left of the word */
};

static int lex_until(struct lex *x, char stop, struct sbuf *out, bool *found);

/* What $name stands for: NULL when unset.  FROM (and ARG before it) sees the ARGs before
 * FROM; the rest ENV values, then the stage's ARGs. */
static const char *var_get(const struct df *d, const char *name)
{
	const char *v;

	if (!d->have_from)
		return json_string_value(json_object_get(d->gargs, name));
	v = json_string_value(json_object_get(d->env, name));
	return v ? v : json_string_value(json_object_get(d->args, name));
}

/* A variable's name at x->s: letters, digits and '_'; a run of digits; or one of the shell's
 * special parameters (never set here).  Its length (0: none), copied into name. */
static size_t lex_name(struct lex *x, char *name, size_t cap)
{
	size_t n;

	if (isdigit((unsigned char)*x->s))
		n = strspn(x->s, "0123456789");
	else if (*x->s && strchr("@*#?-$!", *x->s))
		n = 1;
	else
		n = strspn(x->s, NAME_CHARS);
	snprintf(name, cap, "%.*s", (int)n, x->s);
	x->s += n;
	return n;
}

/* ${name<op>word} after the name: '}' alone, or :- - :+ + :? ? then a word up to '}'. */
static int lex_modifier(struct lex *x, const char *name, struct sbuf *out)
{
	const char *v = var_get(x->d, name);
	struct sbuf word = { 0 };
	bool colon = false, found = false, set;
	char op;
	int rc = 0;

	if (*x->s == '}') {
		x->s++;
		sb_puts(out, v ? v : "");
		return 0;
	}
	if (*x->s == ':') {
		colon = true;
		x->s++;
	}
	op = *x->s;
	if (!op)
		return fail(x->d, "a substitution without its '}'");
	if (!strchr("-+?", op))
		return fail(x->d, "unsupported substitution ${%s%s%c...}", name, colon ? ":" : "", op);
	x->s++;
	if (lex_until(x, '}', &word, &found) < 0) {
		sb_free(&word);
		return -1;
	}
	if (!found) {
		sb_free(&word);
		return fail(x->d, "a substitution without its '}'");
	}
	set = v && (!colon || *v);
	if (op == '-')
		sb_puts(out, set ? v : word.p ? word.p : "");
	else if (op == '+')
		sb_puts(out, set && word.p ? word.p : "");
	else if (!set)
		rc = fail(x->d, "%s: %s", name, word.len ? word.p : "not set");
	else
		sb_puts(out, v);
	sb_free(&word);
	return rc;
}

static int lex_dollar(struct lex *x, struct sbuf *out)
{
	char name[256];

	x->s++;
	if (*x->s != '{') {
		if (!lex_name(x, name, sizeof(name)))
			sb_putc(out, '$');
		else
			sb_puts(out, var_get(x->d, name) ? var_get(x->d, name) : "");
		return 0;
	}
	x->s++;
	if (!*x->s)
		return fail(x->d, "a substitution without its '}'");
	if (strchr("{}:", *x->s) || !lex_name(x, name, sizeof(name)))
		return fail(x->d, "bad substitution");
	return lex_modifier(x, name, out);
}

static int lex_single(struct lex *x, struct sbuf *out)
{
	const char *end = strchr(x->s + 1, '\'');

	if (!end)
		return fail(x->d, "a single quote without its end");
	sb_putn(out, x->s + 1, (size_t)(end - x->s - 1));
	x->s = end + 1;
	return 0;
}

/* "...": '$' substitutes; the escape character escapes only itself, '"' and '$'. */
static int lex_double(struct lex *x, struct sbuf *out)
{
	char esc = x->d->esc;

	x->s++;
	while (*x->s) {
		char c = *x->s;

		if (c == '"') {
			x->s++;
			return 0;
		}
		if (c == '$') {
			if (lex_dollar(x, out) < 0)
				return -1;
			continue;
		}
		if (c == esc && x->s[1] && (x->s[1] == esc || x->s[1] == '"' || x->s[1] == '$'))
			x->s++;
		sb_putc(out, *x->s++);
	}
	return fail(x->d, "a double quote without its end");
}

/* Up to stop (not in quotes; 0: the end), quotes removed and '$' substituted. */
static int lex_until(struct lex *x, char stop, struct sbuf *out, bool *found)
{
	char esc = x->d->esc;
	int rc = 0;

	*found = false;
	while (*x->s && rc == 0) {
		char c = *x->s;

		if (stop && c == stop) {
			x->s++;
			*found = true;
			break;
		}
		if (c == '\'')
			rc = lex_single(x, out);
		else if (c == '"')
			rc = lex_double(x, out);
		else if (c == '$')
			rc = lex_dollar(x, out);
		else if (c != esc)
			sb_putc(out, *x->s++);
		else if (*++x->s) /* an escape at the very end is dropped */
			sb_putc(out, *x->s++);
	}
	return rc;
}

/* One word expanded: a new string, or NULL with d->e set. */
static char *expand(struct df *d, const char *word)
{
	struct lex x = { .d = d, .s = word };
	struct sbuf out = { 0 };
	bool found;
	char *r;

	if (lex_until(&x, 0, &out, &found) < 0) {
		sb_free(&out);
		return NULL;
	}
	if (!(r = sb_take(&out)))
		oom(d);
	return r;
}

/* ---- splitting ------------------------------------------------------ */

static const char *skip_blank(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

/* Words between blanks, as they are (COPY, FROM, EXPOSE). */
static json_t *split_blank(const char *s)
{
	json_t *a = json_array();

	for (s = skip_blank(s); a && *s; s = skip_blank(s)) {
		size_t n = 0;

		while (s[n] && !isspace((unsigned char)s[n]))
			n++;
		if (json_array_append_new(a, json_stringn(s, n)) < 0) {
			json_decref(a);
			return NULL;
		}
		s += n;
	}
	return a;
}

static int push_word(json_t *a, struct sbuf *w, bool keep_empty)
{
	char *s;
	int rc = 0;

	if (!w->len && !keep_empty)
		return 0;
	s = sb_take(w);
	if (!s || json_array_append_new(a, json_string(s)) < 0)
		rc = -1;
	free(s);
	return rc;
}

/* Docker's parseWords (ENV, LABEL, ARG): words between blanks that are not quoted, the
 * quotes and escapes kept for the expansion. */
static json_t *split_words(const char *s, char esc)
{
	json_t *a = json_array();
	struct sbuf w = { 0 };
	bool in_word = false, quoted = false;
	char quote = 0;

	for (; a; s++) {
		char c = *s;

		if (!quote && (!c || isspace((unsigned char)c))) {
			if (in_word && push_word(a, &w, quoted) < 0)
				break;
			in_word = quoted = false;
			if (!c)
				return a;
			continue;
		}
		if (!c) {
			if (push_word(a, &w, true) < 0)
				break;
			return a;
		}
		in_word = true;
		if (!quote && (c == '\'' || c == '"')) {
			quote = c;
			quoted = true;
		} else if (quote && c == quote) {
			quote = 0;
		} else if (c == esc && quote != '\'') {
			if (!s[1])
				continue;
			sb_putc(&w, c);
			c = *++s;
		}
		sb_putc(&w, c);
	}
	sb_free(&w);
	json_decref(a);
	return NULL;
}

/* "name=value" pairs for ENV and LABEL, or the legacy "name value..." (one pair, the value all
 * the rest): an array of [name, value], both still to expand. */
static json_t *name_values(struct df *d, const char *instr, const char *rest)
{
	json_t *words = split_words(rest, d->esc), *pairs = json_array(), *w;
	size_t i;

	if (!words || !pairs)
		goto oom;
	if (!json_array_size(words)) {
		fail(d, "%s needs name=value", instr);
		goto out;
	}
	if (!strchr(json_string_value(json_array_get(words, 0)), '=')) {
		size_t n = strcspn(rest, " \t\v\f\r\n");
		const char *v = skip_blank(rest + n);

		if (!*v) {
			fail(d, "%s %s needs a value: %s name=value", instr, rest, instr);
			goto out;
		}
		if (json_array_append_new(pairs, json_pack("[s%s]", rest, n, v)) < 0)
			goto oom;
		json_decref(words);
		return pairs;
	}
	json_array_foreach(words, i, w) {
		const char *s = json_string_value(w), *eq = strchr(s, '=');

		if (!eq) {
			fail(d, "%s: '%s' is not name=value", instr, s);
			goto out;
		}
		if (json_array_append_new(pairs, json_pack("[s%s]", s, (size_t)(eq - s), eq + 1)) < 0)
			goto oom;
	}
	json_decref(words);
	return pairs;
oom:
	oom(d);
out:
	json_decref(words);
	json_decref(pairs);
	return NULL;
}

/* The JSON exec form: 1 with *out the array of strings, 0 for the shell form, -1. */
static int exec_form(struct df *d, const char *instr, const char *rest, json_t **out)
{
	json_t *v, *x;
	size_t i;

	*out = NULL;
	if (rest[0] != '[')
		return 0;
	v = json_loads(rest, 0, NULL);
	if (!json_is_array(v)) {
		json_decref(v);
		return 0; /* not JSON: the shell form, as Docker takes it */
	}
	json_array_foreach(v, i, x) {
		if (!json_is_string(x)) {
			json_decref(v);
			return fail(d, "%s: the JSON form holds strings only", instr);
		}
	}
	*out = v;
	return 1;
}

/* A heredoc word (Docker: [digits]<<[-]NAME) in a shell-form RUN, COPY or ADD. */
static bool has_heredoc(const char *s)
{
	for (s = skip_blank(s); *s; s = skip_blank(s)) {
		size_t n = 0, d = strspn(s, "0123456789");

		while (s[n] && !isspace((unsigned char)s[n]))
			n++;
		if (n > d + 2 && s[d] == '<' && s[d + 1] == '<') {
			size_t k = d + 2 + (s[d + 2] == '-');

			if (k < n && !memchr(s + k, '<', n - k))
				return true;
		}
		s += n;
	}
	return false;
}

/* "INSTR rest" on one line, blanks collapsed and control characters shown as '?'. */
static char *one_line(const char *instr, const char *rest)
{
	struct sbuf b = { 0 };
	bool blank = false;

	sb_puts(&b, instr);
	sb_putc(&b, ' ');
	for (rest = skip_blank(rest); *rest; rest++) {
		unsigned char c = (unsigned char)*rest;

		if (isspace(c)) {
			blank = true;
			continue;
		}
		if (blank)
			sb_putc(&b, ' ');
		blank = false;
		sb_putc(&b, c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
	return sb_take(&b);
}

/* ---- steps ---------------------------------------------------------- */

/* Append a step (taken over) and its meta. */
static int add_step(struct df *d, json_t *step, const char *text)
{
	if (!step || !text) {
		json_decref(step);
		return oom(d);
	}
	if (json_array_append_new(d->steps, step) < 0 ||
	    json_array_append_new(d->meta, json_pack("{s:i,s:s}", "line", d->line, "text", text)) < 0)
		return oom(d);
	return 0;
}

static int add_step_text(struct df *d, json_t *step, const char *instr, const char *rest)
{
	_cleanup_free_ char *text = one_line(instr, rest);

	return add_step(d, step, text);
}

/* A path made absolute against the WORKDIR when that is known, then cleaned; left relative
 * (cleaned) while only the base's workdir is in force: the daemon resolves it against that.
 * dir: keep a trailing '/' ("into this directory"). */
static char *resolve(struct df *d, const char *instr, const char *p, bool dir)
{
	_cleanup_free_ char *joined = NULL;
	char *r = NULL;

	if (p[0] != '/' && d->workdir) {
		_cleanup_free_ char *abs = NULL;

		if (asprintf(&abs, "%s/%s", d->workdir, p) >= 0)
			joined = dockerignore_clean(abs);
	} else {
		joined = dockerignore_clean(p);
	}
	if (!joined) {
		oom(d);
		return NULL;
	}
	if (strcmp(joined, "..") == 0 || strncmp(joined, "../", 3) == 0) {
		fail(d, "%s %s: a relative path out of the base's workdir (set an absolute WORKDIR "
		     "first)", instr, p);
		return NULL;
	}
	if (asprintf(&r, "%s%s", joined, dir && strcmp(joined, "/") != 0 ? "/" : "") < 0) {
		oom(d);
		return NULL;
	}
	return r;
}

/* ---- instructions --------------------------------------------------- */

static int do_from(struct df *d, const char *instr, const char *rest)
{
	json_t *w = split_blank(rest);
	_cleanup_free_ char *ref = NULL;
	size_t n = json_array_size(w);
	const char *p;
	int rc = 0;

	if (!w)
		return oom(d);
	if (d->have_from)
		rc = fail(d, "multi-stage builds are not supported (a second %s)", instr);
	else if (n != 1 && (n != 3 || strcasecmp(json_string_value(json_array_get(w, 1)), "as")))
		rc = fail(d, "%s takes an image and an optional AS name", instr);
	else if (!(ref = expand(d, json_string_value(json_array_get(w, 0)))))
		rc = -1;
	else if (!*ref)
		rc = fail(d, "%s %s: no image once substituted", instr, rest);
	json_decref(w);
	if (rc < 0)
		return -1;
	p = strncmp(ref, "oci-archive:", 12) == 0 ? ref + 12 :
	    strncmp(ref, "docker-archive:", 15) == 0 ? ref + 15 : NULL;
	if (p && !*p)
		return fail(d, "%s %s: the archive's path is missing", instr, ref);
	if (p ? !(d->archive = strdup(p)) : !(d->from = json_string(ref)))
		return oom(d);
	d->have_from = true;
	d->from_line = d->line;
	return 0;
}

/* An ARG's value: a --build-arg, else its default, else the one before FROM. */
static int arg_value(struct df *d, const char *name, const char *dflt, json_t **out)
{
	const char *given = json_string_value(json_object_get(d->build_args, name));
	_cleanup_free_ char *v = NULL;

	if (given) {
		*out = json_string(given);
		if (json_object_set_new(d->used, name, json_true()) < 0)
			return oom(d);
	} else if (dflt) {
		if (!(v = expand(d, dflt)))
			return -1;
		*out = json_string(v);
	} else if (d->have_from && json_is_string(json_object_get(d->gargs, name))) {
		*out = json_deep_copy(json_object_get(d->gargs, name));
	} else {
		*out = json_null();
	}
	return *out ? 0 : oom(d);
}

static int do_arg(struct df *d, const char *instr, const char *rest)
{
	json_t *words = split_words(rest, d->esc), *w;
	size_t i;
	int rc = 0;

	if (!words)
		return oom(d);
	if (!json_array_size(words))
		rc = fail(d, "%s needs a name", instr);
	json_array_foreach(words, i, w) {
		const char *s = json_string_value(w), *eq = strchr(s, '=');
		_cleanup_free_ char *name = eq ? strndup(s, (size_t)(eq - s)) : strdup(s);
		json_t *v = NULL;

		if (rc < 0)
			break;
		if (!name)
			rc = oom(d);
		else if (!*name)
			rc = fail(d, "%s %s: a name is empty", instr, s);
		else if ((rc = arg_value(d, name, eq ? eq + 1 : NULL, &v)) == 0 &&
			 json_object_set_new(d->have_from ? d->args : d->gargs, name, v) < 0)
			rc = oom(d);
	}
	json_decref(words);
	return rc;
}

/* Whether ARG or ENV name is one a shell can export. */
static bool shell_name(const char *s)
{
	return *s && !isdigit((unsigned char)*s) && strspn(s, NAME_CHARS) == strlen(s);
}

static void export_one(struct sbuf *b, bool *any, const char *k, const char *v)
{
	sb_puts(b, *any ? " " : "export ");
	sb_puts(b, k);
	sb_putc(b, '=');
	sb_quote(b, v);
	*any = true;
}

/* A shell-form RUN with the ARG values in force in its environment, as Docker runs it (ENV
 * values, which the env steps set, win).  Docker's proxy build args need no ARG. */
static char *run_shell(struct df *d, const char *cmd)
{
	static const char *const proxies[] = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
		"https_proxy", "FTP_PROXY", "ftp_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
		"all_proxy" };
	struct sbuf b = { 0 };
	bool any = false;
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(d->args, k, v)
		if (json_is_string(v) && !json_object_get(d->env, k) && shell_name(k))
			export_one(&b, &any, k, json_string_value(v));
	for (i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++) {
		const char *p = json_string_value(json_object_get(d->build_args, proxies[i]));

		if (!p || json_object_get(d->args, proxies[i]) || json_object_get(d->env, proxies[i]))
			continue;
		export_one(&b, &any, proxies[i], p);
		if (json_object_set_new(d->used, proxies[i], json_true()) < 0)
			b.oom = true;
	}
	if (any)
		sb_puts(&b, "; ");
	sb_puts(&b, cmd);
	return sb_take(&b);
}

static int do_run(struct df *d, const char *instr, const char *rest)
{
	_cleanup_free_ char *cmd = NULL;
	json_t *argv;
	int rc;

	if (!*rest)
		return fail(d, "%s needs a command", instr);
	if ((rc = exec_form(d, instr, rest, &argv)) < 0)
		return -1;
	if (rc == 1) {
		if (!json_array_size(argv) || !json_string_length(json_array_get(argv, 0))) {
			json_decref(argv);
			return fail(d, "%s: the command is empty", instr);
		}
		return add_step_text(d, json_pack("{s:o}", "run", argv), instr, rest);
	}
	if (has_heredoc(rest))
		return fail(d, "heredocs (<<EOF) are not supported");
	if (!(cmd = run_shell(d, rest)))
		return oom(d);
	return add_step_text(d, json_pack("{s:s}", "run", cmd), instr, rest);
}

/* A COPY source: relative to the context root (a leading '/' too), cleaned; NULL (e set)
 * when it leaves the context. */
static char *source(struct df *d, const char *instr, const char *src)
{
	char *s = dockerignore_clean(src + strspn(src, "/"));

	if (!s) {
		oom(d);
		return NULL;
	}
	if (strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0) {
		fail(d, "%s %s: the source is outside the build context", instr, src);
		free(s);
		return NULL;
	}
	return s;
}

/* Docker: a destination names a directory when it ends in '/' (or is "." or ".."). */
static bool dest_is_dir(const char *p)
{
	size_t n = strlen(p);

	return (n && p[n - 1] == '/') || strcmp(p, ".") == 0 || strcmp(p, "..") == 0 ||
	       (n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0);
}

static bool is_url(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");

	return (n && isalpha((unsigned char)s[0]) && strncmp(s + n, "://", 3) == 0) ||
	       strncmp(s, "git@", 4) == 0;
}

static bool is_archive_name(const char *s)
{
	static const char *const ext[] = { ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2",
					   ".tar.xz", ".txz", ".tar.zst" };
	size_t n = strlen(s), i;

	for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
		if (n > strlen(ext[i]) && strcasecmp(s + n - strlen(ext[i]), ext[i]) == 0)
			return true;
	return false;
}

static int copy_step(struct df *d, const char *instr, const char *src, const char *dest,
		     const char *chown)
{
	_cleanup_free_ char *rest = NULL;
	json_t *c = json_pack("{s:s,s:s}", "src", src, "dest", dest);

	if (c && chown && json_object_set_new(c, "chown", json_string(chown)) < 0) {
		json_decref(c);
		c = NULL;
	}
	if (asprintf(&rest, "%s%s%s%s %s", chown ? "--chown=" : "", chown ? chown : "",
		     chown ? " " : "", src, dest) < 0)
		rest = NULL;
	if (!rest) {
		json_decref(c);
		return oom(d);
	}
	return add_step_text(d, c ? json_pack("{s:o}", "copy", c) : NULL, instr, rest);
}

/* The words of COPY or ADD, expanded (JSON form or blank-separated). */
static json_t *copy_words(struct df *d, const char *instr, const char *rest)
{
	json_t *w, *out, *x;
	size_t i;
	int rc = exec_form(d, instr, rest, &w);

	if (rc < 0)
		return NULL;
	if (rc == 0 && has_heredoc(rest)) {
		fail(d, "heredocs (<<EOF) are not supported");
		return NULL;
	}
	if (rc == 0 && !(w = split_blank(rest))) {
		oom(d);
		return NULL;
	}
	if (!(out = json_array()))
		oom(d);
	json_array_foreach(w, i, x) {
		_cleanup_free_ char *s = out ? expand(d, json_string_value(x)) : NULL;

		if (!s || json_array_append_new(out, json_string(s)) < 0) {
			if (s)
				oom(d);
			json_decref(out);
			out = NULL;
			break;
		}
	}
	json_decref(w);
	return out;
}

/* One copy step per source, the sources checked against the words. */
static int copy_sources(struct df *d, const char *instr, json_t *w, const char *dest,
			const char *chown)
{
	size_t i, n = json_array_size(w) - 1;

	for (i = 0; i < n; i++) {
		const char *raw = json_string_value(json_array_get(w, i));
		_cleanup_free_ char *src = NULL;

		if (strcmp(instr, "ADD") == 0 && is_url(raw))
			return fail(d, "%s of a URL is not supported (%s)", instr, raw);
		if (!(src = source(d, instr, raw)))
			return -1;
		if (strcmp(instr, "ADD") == 0 && is_archive_name(src))
			warn(d, "%s %s: the archive is copied as it is, not extracted", instr, src);
		if (copy_step(d, instr, src, dest, chown) < 0)
			return -1;
	}
	return 0;
}

static int do_copy_add(struct df *d, const char *instr, const char *rest)
{
	_cleanup_free_ char *chown = NULL, *dest = NULL;
	const struct flags *f = d->flags;
	const char *last;
	json_t *w;
	size_t i;
	int rc = 0;

	for (i = 0; i < f->n; i++) {
		if (!f->v[i].value || !*f->v[i].value)
			return fail(d, "%s --chown needs user[:group]", instr);
		free(chown);
		if (!(chown = expand(d, f->v[i].value)))
			return -1;
	}
	if (!(w = copy_words(d, instr, rest)))
		return -1;
	if (json_array_size(w) < 2) {
		json_decref(w);
		return fail(d, "%s needs a source and a destination", instr);
	}
	last = json_string_value(json_array_get(w, json_array_size(w) - 1));
	if (!*last) {
		json_decref(w);
		return fail(d, "%s: the destination is empty", instr);
	}
	dest = resolve(d, instr, last, dest_is_dir(last) || json_array_size(w) > 2);
	if (!dest)
		rc = -1;
	else if (chown && !*chown)
		rc = fail(d, "%s --chown: empty once substituted", instr);
	else
		rc = copy_sources(d, instr, w, dest, chown);
	json_decref(w);
	return rc;
}

/* Expanded name=value pairs into obj (ENV: all expanded before any is set, as Docker). */
static int set_pairs(struct df *d, const char *instr, const char *rest, json_t *obj)
{
	json_t *pairs = name_values(d, instr, rest), *kv, *vals = json_object();
	size_t i;
	int rc = 0;

	if (!pairs || !vals) {
		json_decref(pairs);
		json_decref(vals);
		return pairs ? oom(d) : -1;
	}
	json_array_foreach(pairs, i, kv) {
		_cleanup_free_ char *k = expand(d, json_string_value(json_array_get(kv, 0)));
		_cleanup_free_ char *v = k ? expand(d, json_string_value(json_array_get(kv, 1))) : NULL;

		if (!k || !v)
			rc = -1;
		else if (!*k)
			rc = fail(d, "%s: a name is empty", instr);
		else if (json_object_set_new(vals, k, json_string(v)) < 0)
			rc = oom(d);
		if (rc < 0)
			break;
	}
	if (rc == 0 && json_object_update(obj, vals) < 0)
		rc = oom(d);
	if (rc == 0 && obj == d->env)
		rc = add_step_text(d, json_pack("{s:O}", "env", vals), instr, rest);
	json_decref(pairs);
	json_decref(vals);
	return rc;
}

static int do_env(struct df *d, const char *instr, const char *rest)
{
	return set_pairs(d, instr, rest, d->env);
}

static int do_label(struct df *d, const char *instr, const char *rest)
{
	return set_pairs(d, instr, rest, d->labels);
}

static int do_workdir(struct df *d, const char *instr, const char *rest)
{
	_cleanup_free_ char *p = expand(d, rest), *wd = NULL;

	if (!p)
		return -1;
	if (!*p)
		return fail(d, "%s needs a path", instr);
	if (!(wd = resolve(d, instr, p, false)))
		return -1;
	if (wd[0] == '/') {
		free(d->workdir);
		if (!(d->workdir = strdup(wd)))
			return oom(d);
	}
	return add_step_text(d, json_pack("{s:s}", "workdir", wd), instr, rest);
}

static int do_user(struct df *d, const char *instr, const char *rest)
{
	_cleanup_free_ char *u = expand(d, rest);

	if (!u)
		return -1;
	u[strcspn(u, ":")] = '\0'; /* the group is the user's own */
	if (!*u)
		return fail(d, "%s needs a user", instr);
	return add_step_text(d, json_pack("{s:s}", "user", u), instr, rest);
}

/* CMD and ENTRYPOINT: the last of each wins. */
static int do_start(struct df *d, const char *instr, const char *rest, json_t **slot)
{
	json_t *v;
	int rc;

	if (!*rest)
		return fail(d, "%s needs a command", instr);
	if ((rc = exec_form(d, instr, rest, &v)) < 0)
		return -1;
	if (rc == 0 && !(v = json_string(rest)))
		return oom(d);
	json_decref(*slot);
	*slot = v;
	return 0;
}

static int do_cmd(struct df *d, const char *instr, const char *rest)
{
	return do_start(d, instr, rest, &d->cmd);
}

static int do_entrypoint(struct df *d, const char *instr, const char *rest)
{
	return do_start(d, instr, rest, &d->entrypoint);
}

/* A port, 1 to 65535, the whole string.  0 if not. */
static long port_of(const char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (!n || n > 5)
		return 0;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	return v <= 65535 ? v : 0;
}

static int expose_add(struct df *d, long port)
{
	json_t *x;
	size_t i;

	json_array_foreach(d->expose, i, x)
		if (json_integer_value(x) == port)
			return 0;
	if (json_array_size(d->expose) >= DF_EXPOSE_MAX)
		return fail(d, "more than %d ports exposed", DF_EXPOSE_MAX);
	return json_array_append_new(d->expose, json_integer(port)) < 0 ? oom(d) : 0;
}

/* "8000", "8000/tcp", "8000-8010". */
static int expose_spec(struct df *d, const char *instr, const char *spec)
{
	const char *slash = strchr(spec, '/'), *dash;
	size_t n = slash ? (size_t)(slash - spec) : strlen(spec);
	long lo, hi;

	if (slash && strcasecmp(slash + 1, "tcp") != 0)
		return fail(d, "%s %s: only TCP ports are supported", instr, spec);
	dash = memchr(spec, '-', n);
	lo = port_of(spec, dash ? (size_t)(dash - spec) : n);
	hi = dash ? port_of(dash + 1, n - (size_t)(dash - spec) - 1) : lo;
	if (!lo || !hi || hi < lo)
		return fail(d, "%s %s: not a port (1 to 65535) or range of ports", instr, spec);
	for (; lo <= hi; lo++)
		if (expose_add(d, lo) < 0)
			return -1;
	return 0;
}

static int do_expose(struct df *d, const char *instr, const char *rest)
{
	_cleanup_free_ char *all = expand(d, rest);
	json_t *w, *x;
	size_t i;
	int rc = 0;

	if (!all)
		return -1;
	if (!(w = split_blank(all)))
		return oom(d);
	if (!json_array_size(w))
		rc = fail(d, "%s needs a port", instr);
	json_array_foreach(w, i, x)
		if (rc == 0)
			rc = expose_spec(d, instr, json_string_value(x));
	json_decref(w);
	return rc;
}

static int do_maintainer(struct df *d, const char *instr, const char *rest)
{
	(void)rest;
	warn(d, "%s is deprecated and ignored (use LABEL)", instr);
	return 0;
}

struct instr {
	const char *name;
	int (*fn)(struct df *d, const char *instr, const char *rest);
	bool chown; /* takes --chown */
};

static const struct instr instrs[] = {
	{ "from", do_from, false },	  { "arg", do_arg, false },
	{ "run", do_run, false },	  { "copy", do_copy_add, true },
	{ "add", do_copy_add, true },	  { "env", do_env, false },
	{ "workdir", do_workdir, false }, { "user", do_user, false },
	{ "cmd", do_cmd, false },	  { "entrypoint", do_entrypoint, false },
	{ "expose", do_expose, false },	  { "label", do_label, false },
	{ "maintainer", do_maintainer, false },
};

/* ---- flags ---------------------------------------------------------- */

static void flags_free(struct flags *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		free(f->v[i].name);
		free(f->v[i].value);
	}
	f->n = 0;
}

/* One "--name[=value]" word at *p (quotes and '\' as Docker's extractBuilderFlags). */
static char *flag_word(const char **p)
{
	struct sbuf w = { 0 };
	const char *s = *p;
	char quote = 0;

	for (; *s && (quote || !isspace((unsigned char)*s)); s++) {
		if (!quote && (*s == '\'' || *s == '"')) {
			quote = *s;
			continue;
		}
		if (quote && *s == quote) {
			quote = 0;
			continue;
		}
		if (*s == '\\' && s[1])
			s++;
		sb_putc(&w, *s);
	}
	*p = s;
	return sb_take(&w);
}

/* The leading flags of an instruction; *rest moved past them. */
static int take_flags(struct df *d, const char **rest, struct flags *f)
{
	const char *p = skip_blank(*rest);

	while (p[0] == '-' && p[1] == '-') {
		_cleanup_free_ char *w = flag_word(&p);
		char *eq;

		if (!w)
			return oom(d);
		p = skip_blank(p);
		if (strcmp(w, "--") == 0)
			break;
		if (f->n == FLAGS_MAX)
			return fail(d, "too many flags");
		eq = strchr(w, '=');
		f->v[f->n].name = strndup(w + 2, eq ? (size_t)(eq - w - 2) : strlen(w + 2));
		f->v[f->n].value = eq ? strdup(eq + 1) : NULL;
		if (!f->v[f->n].name || (eq && !f->v[f->n].value)) {
			free(f->v[f->n].name);
			free(f->v[f->n].value);
			return oom(d);
		}
		f->n++;
	}
	*rest = p;
	return 0;
}

/* Only COPY and ADD take a flag, --chown. */
static int check_flags(struct df *d, const char *instr, bool copy, const struct flags *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		const char *n = f->v[i].name;

		if (copy && strcmp(n, "chown") == 0)
			continue;
		if (copy && strcmp(n, "from") == 0)
			return fail(d, "%s --from is not supported (one stage only)", instr);
		return fail(d, "%s --%s is not supported", instr, n);
	}
	return 0;
}

/* ---- reading the text ----------------------------------------------- */

/* The next physical line, without its line end: 1, or 0 at the end, or -1. */
static int next_line(struct df *d, const char **line, size_t *n)
{
	const char *s = d->text + d->pos, *nl;

	if (d->pos >= d->len)
		return 0;
	nl = memchr(s, '\n', d->len - d->pos);
	*n = nl ? (size_t)(nl - s) : d->len - d->pos;
	d->pos += *n + (nl ? 1 : 0);
	d->lineno++;
	if (*n && s[*n - 1] == '\r')
		(*n)--;
	*line = s;
	if (memchr(s, '\0', *n)) {
		d->line = d->lineno;
		return fail(d, "a NUL byte");
	}
	return 1;
}

static void skip_line_blank(const char **l, size_t *n)
{
	while (*n && isspace((unsigned char)**l)) {
		(*l)++;
		(*n)--;
	}
}

static int set_directive(struct df *d, const char *key, const char *v, size_t vn)
{
	bool *seen = strcmp(key, "escape") == 0 ? &d->seen_escape :
		     strcmp(key, "syntax") == 0 ? &d->seen_syntax : &d->seen_check;

	d->line = d->lineno;
	if (*seen)
		return fail(d, "only one %s parser directive may be used", key);
	*seen = true;
	if (seen != &d->seen_escape)
		return 1; /* syntax= names a frontend image, check= linter rules: nothing here */
	if (vn != 1 || (v[0] != '\\' && v[0] != '`'))
		return fail(d, "the escape directive takes ` or \\, not '%.*s'", (int)vn, v);
	d->esc = v[0];
	return 1;
}

/* "# key=value" while the file starts with such lines: 1 if it was one (escape, syntax or
 * check), 0 if not (then none come after), -1. */
static int directive(struct df *d, const char *l, size_t n)
{
	char key[16];
	size_t k = 0, i;

	skip_line_blank(&l, &n);
	if (!n || *l != '#')
		return 0;
	for (i = 1; i < n && (l[i] == ' ' || l[i] == '\t'); i++)
		;
	while (i < n && isalnum((unsigned char)l[i]) && k + 1 < sizeof(key))
		key[k++] = (char)tolower((unsigned char)l[i++]);
	key[k] = '\0';
	if (!k || isdigit((unsigned char)key[0]))
		return 0;
	for (; i < n && (l[i] == ' ' || l[i] == '\t'); i++)
		;
	if (i >= n || l[i++] != '=')
		return 0;
	for (; i < n && (l[i] == ' ' || l[i] == '\t'); i++)
		;
	while (n > i && (l[n - 1] == ' ' || l[n - 1] == '\t'))
		n--;
	if (i >= n || (strcmp(key, "escape") && strcmp(key, "syntax") && strcmp(key, "check")))
		return 0;
	return set_directive(d, key, l + i, n - i);
}

/* Append a line to the instruction; whether it ends in the escape character (followed by
 * blanks only): then the next line continues it. */
static bool add_piece(struct df *d, struct sbuf *ins, const char *l, size_t n)
{
	size_t m = n;

	while (m && (l[m - 1] == ' ' || l[m - 1] == '\t'))
		m--;
	if (m && l[m - 1] == d->esc) {
		sb_putn(ins, l, m - 1);
		return true;
	}
	sb_putn(ins, l, n);
	return false;
}

static bool blank_or_comment(const char *l, size_t n)
{
	skip_line_blank(&l, &n);
	return !n || *l == '#';
}

/* The continuation lines of an instruction (comment and blank lines skipped). */
static int continue_instr(struct df *d, struct sbuf *ins)
{
	const char *l;
	size_t n;
	int rc;

	while ((rc = next_line(d, &l, &n)) > 0) {
		if (blank_or_comment(l, n))
			continue;
		if (!add_piece(d, ins, l, n))
			break;
	}
	return rc < 0 ? -1 : 0;
}

/* The next instruction, whole: 1 (in ins, d->line its first line), 0 at the end, -1. */
static int next_instr(struct df *d, struct sbuf *ins)
{
	const char *l;
	size_t n;
	int rc;

	for (;;) {
		if ((rc = next_line(d, &l, &n)) <= 0)
			return rc;
		if (!d->directives_done) {
			if ((rc = directive(d, l, n)) < 0)
				return -1;
			if (rc)
				continue;
			d->directives_done = true;
		}
		if (blank_or_comment(l, n))
			continue;
		skip_line_blank(&l, &n);
		d->line = d->lineno;
		sb_free(ins);
		if (add_piece(d, ins, l, n) && continue_instr(d, ins) < 0)
			return -1;
		if (ins->oom)
			return oom(d);
		if (ins->p && *skip_blank(ins->p))
			return 1;
	}
}

/* ---- one instruction ------------------------------------------------ */

static int dispatch(struct df *d, const char *word, const char *rest)
{
	char lower[32], upper[32];
	struct flags f = { 0 };
	const struct instr *in = NULL;
	size_t i;
	int rc;

	for (i = 0; word[i] && i + 1 < sizeof(lower); i++) {
		lower[i] = (char)tolower((unsigned char)word[i]);
		upper[i] = (char)toupper((unsigned char)word[i]);
	}
	lower[i] = upper[i] = '\0';
	for (i = 0; i < sizeof(instrs) / sizeof(instrs[0]); i++)
		if (strlen(word) < sizeof(lower) && strcmp(instrs[i].name, lower) == 0)
			in = &instrs[i];
	if (!in)
		return fail(d, "%s is not supported", upper);
	if (!d->have_from && in->fn != do_from && in->fn != do_arg)
		return fail(d, "%s before FROM (only ARG may come before it)", upper);
	if (take_flags(d, &rest, &f) < 0 || check_flags(d, upper, in->chown, &f) < 0) {
		flags_free(&f);
		return -1;
	}
	d->flags = &f;
	rc = in->fn(d, upper, rest);
	d->flags = NULL;
	flags_free(&f);
	return rc;
}

static int parse_all(struct df *d)
{
	struct sbuf ins = { 0 };
	int rc;

	while ((rc = next_instr(d, &ins)) > 0) {
		char *s = (char *)skip_blank(ins.p), *end = s + strlen(s), *rest;

		while (end > s && isspace((unsigned char)end[-1]))
			*--end = '\0';
		rest = s + strcspn(s, " \t\v\f\r\n");
		if (*rest)
			*rest++ = '\0';
		if ((rc = dispatch(d, s, skip_blank(rest))) < 0)
			break;
	}
	sb_free(&ins);
	return rc;
}

/* ---- the request ---------------------------------------------------- */

/* ENTRYPOINT's exec form, then CMD's (the shell form as Docker runs it: /bin/sh -c). */
static int start_argv(const struct df *d, json_t *argv)
{
	json_t *sh;
	int rc;

	if (json_is_array(d->entrypoint) && json_array_extend(argv, d->entrypoint) < 0)
		return -1;
	if (json_is_array(d->cmd))
		return json_array_extend(argv, d->cmd);
	if (!json_is_string(d->cmd))
		return 0;
	sh = json_pack("[ssO]", "/bin/sh", "-c", d->cmd);
	rc = sh ? json_array_extend(argv, sh) : -1;
	json_decref(sh);
	return rc;
}

/* What the template starts with: Docker's ENTRYPOINT and CMD, as one shell command line.
 * *out NULL when there is none. */
static int start_cmd(struct df *d, char **out)
{
	json_t *argv;

	*out = NULL;
	if (json_is_string(d->entrypoint) || (!d->entrypoint && json_is_string(d->cmd))) {
		const json_t *s = d->entrypoint ? d->entrypoint : d->cmd;

		*out = strdup(json_string_value(s));
		return *out ? 0 : oom(d);
	}
	if (!(argv = json_array()))
		return oom(d);
	if (start_argv(d, argv) < 0) {
		json_decref(argv);
		return oom(d);
	}
	if (json_array_size(argv) && !(*out = dockerfile_shell_join(argv))) {
		json_decref(argv);
		return oom(d);
	}
	json_decref(argv);
	return 0;
}

static void warn_unused(struct df *d)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)d->build_args, k, v)
		if (!json_object_get(d->used, k) && d->warn) {
			char msg[600];

			snprintf(msg, sizeof(msg), "--build-arg %.500s: no ARG of %s takes it", k,
				 d->name);
			d->warn(msg, d->warn_arg);
		}
}

static int finish(struct df *d, struct dockerfile *out)
{
	_cleanup_free_ char *cmd = NULL;
	json_t *req;

	if (!d->have_from)
		return err_set(d->e, EINVAL, "%s: no FROM instruction", d->name);
	if (start_cmd(d, &cmd) < 0)
		return -1;
	if (!(req = json_object()))
		return oom(d);
	if ((d->from && json_object_set(req, "from", d->from) < 0) ||
	    json_object_set(req, "steps", d->steps) < 0 ||
	    (cmd && json_object_set_new(req, "start", json_pack("{s:s}", "cmd", cmd)) < 0) ||
	    (json_array_size(d->expose) && json_object_set(req, "expose", d->expose) < 0) ||
	    (json_object_size(d->labels) && json_object_set(req, "labels", d->labels) < 0)) {
		json_decref(req);
		return oom(d);
	}
	warn_unused(d);
	out->req = req;
	out->meta = json_incref(d->meta);
	out->archive = d->archive;
	out->from_line = d->from_line;
	d->archive = NULL;
	return 0;
}

static void df_free(struct df *d)
{
	json_decref(d->used);
	json_decref(d->gargs);
	json_decref(d->args);
	json_decref(d->env);
	json_decref(d->from);
	json_decref(d->cmd);
	json_decref(d->entrypoint);
	json_decref(d->steps);
	json_decref(d->meta);
	json_decref(d->expose);
	json_decref(d->labels);
	free(d->workdir);
	free(d->archive);
}

int dockerfile_parse(const char *name, const char *text, size_t len, const json_t *build_args,
		     df_warn_fn warn_fn, void *warn_arg, struct dockerfile *out, space_err *e)
{
	struct df d = {
		.name = name ? name : "Dockerfile",
		.text = text,
		.len = len,
		.esc = '\\',
		.build_args = json_is_object(build_args) ? build_args : NULL,
		.warn = warn_fn,
		.warn_arg = warn_arg,
		.e = e,
	};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		d.pos = 3;
	d.used = json_object();
	d.gargs = json_object();
	d.args = json_object();
	d.env = json_object();
	d.steps = json_array();
	d.meta = json_array();
	d.expose = json_array();
	d.labels = json_object();
	if (!d.used || !d.gargs || !d.args || !d.env || !d.steps || !d.meta || !d.expose ||
	    !d.labels)
		oom(&d);
	else if (parse_all(&d) == 0)
		rc = finish(&d, out);
	df_free(&d);
	return rc;
}

void dockerfile_free(struct dockerfile *df)
{
	json_decref(df->req);
	json_decref(df->meta);
	free(df->archive);
	memset(df, 0, sizeof(*df));
}

/* ---- the template's name and tags ---------------------------------- */

static bool chars_ok(const char *s, size_t n, const char *first, const char *rest, size_t max)
{
	return n >= 1 && n <= max && strchr(first, s[0]) && s[0] && strspn(s + 1, rest) == n - 1;
}

#define LOWER "abcdefghijklmnopqrstuvwxyz0123456789"
#define ANY LOWER "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"

int dockerfile_tag_arg(const char *arg, char name[DF_NAME_MAX + 1], char tag[DF_TAG_MAX + 1],
		       space_err *e)
{
	const char *colon = strchr(arg, ':'), *t = colon ? colon + 1 : "latest";
	size_t n = colon ? (size_t)(colon - arg) : strlen(arg);

	if (!chars_ok(arg, n, LOWER, LOWER "._-", DF_NAME_MAX))
		return err_set(e, EINVAL, "-t %.200s: a name is 1 to %d of [a-z0-9._-], starting "
			       "with a letter or digit", arg, DF_NAME_MAX);
	if (!chars_ok(t, strlen(t), ANY, ANY ".-", DF_TAG_MAX))
		return err_set(e, EINVAL, "-t %.200s: a tag is 1 to %d of [A-Za-z0-9_.-], not "
			       "starting with '.' or '-'", arg, DF_TAG_MAX);
	memcpy(name, arg, n);
	name[n] = '\0';
	snprintf(tag, DF_TAG_MAX + 1, "%s", t);
	return 0;
}

/* ---- after the parse ------------------------------------------------ */

int dockerfile_has_copy(const struct dockerfile *df)
{
	json_t *s;
	size_t i;

	json_array_foreach(json_object_get(df->req, "steps"), i, s)
		if (json_object_get(s, "copy"))
			return 1;
	return 0;
}

static bool is_reserved(const char *w)
{
	static const char *const words[] = { "case", "do", "done", "elif", "else", "esac", "fi",
		"for", "if", "in", "then", "until", "while", "function", "select", "time", "coproc" };
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(w, words[i]) == 0)
			return true;
	return false;
}

char *dockerfile_shell_join(const json_t *argv)
{
	struct sbuf b = { 0 };
	json_t *x;
	size_t i;

	json_array_foreach((json_t *)argv, i, x) {
		const char *w = json_string_value(x) ? json_string_value(x) : "";
		bool plain = *w && strspn(w, SAFE_CHARS) == strlen(w) &&
			     (i || (!strchr(w, '=') && !is_reserved(w)));

		if (i)
			sb_putc(&b, ' ');
		if (plain)
			sb_puts(&b, w);
		else
			sb_quote(&b, w);
	}
	return sb_take(&b);
}

static bool has_glob(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' && s[1])
			s++;
		else if (*s == '*' || *s == '?' || *s == '[')
			return true;
	}
	return false;
}

static bool in_paths(const char *s, const char *const *paths, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(paths[i], s) == 0)
			return true;
	return false;
}

/* Replace the copy step at *i by one per path its wildcard source matches. */
static int expand_glob(struct dockerfile *df, const char *name, size_t *i, const char *const *paths,
		       size_t npaths, space_err *e)
{
	json_t *steps = json_object_get(df->req, "steps"), *meta = json_array_get(df->meta, *i);
	json_t *copy = json_object_get(json_array_get(steps, *i), "copy");
	const char *src = json_string_value(json_object_get(copy, "src"));
	const char *chown = json_string_value(json_object_get(copy, "chown"));
	const char *text = json_string_value(json_object_get(meta, "text"));
	int line = (int)json_integer_value(json_object_get(meta, "line"));
	json_t *news = json_array(), *newm = json_array(), *c;
	_cleanup_free_ char *dest = NULL;
	size_t k, hits = 0, at = *i;

	for (k = 0; k < npaths; k++)
		hits += fnmatch(src, paths[k], FNM_PATHNAME) == 0;
	if (!hits || json_array_size(steps) + hits - 1 > DF_STEPS_MAX) {
		json_decref(news);
		json_decref(newm);
		if (!hits)
			return err_set(e, EINVAL, "%s:%d: %s: no file in the build context matches",
				       name, line, text);
		return err_set(e, EINVAL, "%s:%d: %s: %zu matches make more than %d steps", name,
			       line, text, hits, DF_STEPS_MAX);
	}
	dest = strdup(json_string_value(json_object_get(copy, "dest")));
	if (dest && hits > 1 && dest[strlen(dest) - 1] != '/') {
		char *d2 = NULL;

		if (asprintf(&d2, "%s/", dest) < 0)
			d2 = NULL;
		free(dest);
		dest = d2;
	}
	for (k = 0; dest && news && newm && k < npaths; k++) {
		_cleanup_free_ char *t = NULL;

		if (fnmatch(src, paths[k], FNM_PATHNAME) != 0)
			continue;
		c = chown ? json_pack("{s:{s:s,s:s,s:s}}", "copy", "src", paths[k], "dest", dest, "chown", chown)
			  : json_pack("{s:{s:s,s:s}}", "copy", "src", paths[k], "dest", dest);
		if (asprintf(&t, "%.*s %s%s%s%s %s", (int)strcspn(text, " "), text,
			     chown ? "--chown=" : "", chown ? chown : "", chown ? " " : "", paths[k], dest) < 0)
			t = NULL;
		if (!c || !t || json_array_append_new(news, c) < 0 ||
		    json_array_append_new(newm, json_pack("{s:i,s:s}", "line", line, "text", t)) < 0) {
			json_decref(news);
			news = NULL;
		}
	}
	if (!dest || !news || !newm) {
		json_decref(news);
		json_decref(newm);
		return err_set(e, ENOMEM, "out of memory");
	}
	json_array_remove(steps, at);
	json_array_remove(df->meta, at);
	for (k = 0; k < hits; k++) {
		json_array_insert(steps, at + k, json_array_get(news, k));
		json_array_insert(df->meta, at + k, json_array_get(newm, k));
	}
	json_decref(news);
	json_decref(newm);
	*i = at + hits - 1;
	return 0;
}

int dockerfile_resolve_sources(struct dockerfile *df, const char *name, const char *const *paths,
			       size_t npaths, space_err *e)
{
	json_t *steps = json_object_get(df->req, "steps");
	size_t i;

	if (!name)
		name = "Dockerfile";
	for (i = 0; i < json_array_size(steps); i++) {
		json_t *copy = json_object_get(json_array_get(steps, i), "copy");
		const char *src = json_string_value(json_object_get(copy, "src"));
		json_t *meta = json_array_get(df->meta, i);

		if (!src || strcmp(src, ".") == 0)
			continue;
		if (has_glob(src)) {
			if (expand_glob(df, name, &i, paths, npaths, e) < 0)
				return -1;
		} else if (!in_paths(src, paths, npaths)) {
			return err_set(e, ENOENT, "%s:%d: %s: %s is not in the build context (missing, "
				       "or excluded by .dockerignore)", name,
				       (int)json_integer_value(json_object_get(meta, "line")),
				       json_string_value(json_object_get(meta, "text")), src);
		}
	}
	return 0;
}
