/* dockerignore.c -- .dockerignore patterns (see dockerignore.h).
 *
 * Docker (moby/patternmatcher) turns a pattern into a regular expression: '*' is "[^/]*", '?'
 * "[^/]", "**" (and a '/' after it) an optional run of characters ending in '/', a trailing
 * "**" ".*", classes as they are, "\x" a literal x; the whole path must match.  The matcher
 * below does the same by backtracking over the pattern, on [path, end) so that parent
 * directories are matched in place. */
#include "dockerignore.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

struct pattern {
	char *text;     /* cleaned, without the '!' */
	bool exception; /* '!': brings back what an earlier pattern excluded */
};

struct dockerignore {
	struct pattern *v;
	size_t n, cap;
};

struct dockerignore *dockerignore_new(void)
{
	return calloc(1, sizeof(struct dockerignore));
}

void dockerignore_free(struct dockerignore *di)
{
	size_t i;

	if (!di)
		return;
	for (i = 0; i < di->n; i++)
		free(di->v[i].text);
	free(di->v);
	free(di);
}

size_t dockerignore_count(const struct dockerignore *di)
{
	return di->n;
}

/* ---- matching ------------------------------------------------------- */

/* A match of a checked pattern against [path, end).  Branches ('*', "**") that failed from a
 * (pattern, path) position are remembered once there were many, so that a pattern with many
 * '*' stays polynomial, as Docker's regular expressions are. */
struct match {
	const char *pat, *path, *end;
	bool partial;         /* also when the path runs out while the pattern goes on */
	unsigned long tries;  /* branches tried */
	unsigned char *failed; /* a bit per (pattern offset, path offset) */
	size_t cols;
	bool no_memo;
};

#define MEMO_AFTER 256           /* branches tried before remembering failures */
#define MEMO_MAX_BITS (8u << 20) /* 1 MiB of bits at most */

static bool glob(struct match *m, const char *p, const char *s);

static unsigned char *memo_bit(struct match *m, const char *p, const char *s, unsigned char *mask)
{
	size_t rows, bit;

	if (!m->failed && !m->no_memo && ++m->tries > MEMO_AFTER) {
		rows = strlen(m->pat) + 1;
		m->cols = (size_t)(m->end - m->path) + 1;
		if (rows > MEMO_MAX_BITS / m->cols || !(m->failed = calloc(rows * m->cols / 8 + 1, 1)))
			m->no_memo = true;
	}
	if (!m->failed)
		return NULL;
	bit = (size_t)(p - m->pat) * m->cols + (size_t)(s - m->path);
	*mask = (unsigned char)(1u << (bit % 8));
	return &m->failed[bit / 8];
}

/* glob() from a branch point. */
static bool branch(struct match *m, const char *p, const char *s)
{
	unsigned char mask = 0, *b = memo_bit(m, p, s, &mask);

	if (b && (*b & mask))
		return false;
	if (glob(m, p, s))
		return true;
	if (b)
		*b |= mask;
	return false;
}

/* The character of a class at *p (a '\' escape taken), *p moved past it. */
static unsigned char class_char(const char **p)
{
	if (**p == '\\')
		(*p)++;
	return (unsigned char)*(*p)++;
}

/* p at '[' of a checked class; *after gets what follows its ']'. */
static bool class_match(const char *p, unsigned char c, const char **after)
{
	bool neg = false, hit = false;

	p++;
	if (*p == '^') {
		neg = true;
		p++;
	}
	do {
		unsigned char lo = class_char(&p), hi = lo;

		if (*p == '-') {
			p++;
			hi = class_char(&p);
		}
		if (lo <= c && c <= hi)
			hit = true;
	} while (*p != ']');
	*after = p + 1;
	return hit != neg;
}

/* '*': any run of characters but '/'. */
static bool star(struct match *m, const char *p, const char *s)
{
	for (;;) {
		if (branch(m, p, s))
			return true;
		if (s == m->end || *s == '/')
			return false;
		s++;
	}
}

/* After "**": an optional run of characters ending in '/', then the rest; or anything at
 * all when nothing follows. */
static bool star2(struct match *m, const char *p, const char *s)
{
	if (*p == '/')
		p++;
	if (!*p)
		return true;
	if (branch(m, p, s))
		return true;
	for (; s < m->end; s++)
		if (*s == '/' && branch(m, p, s + 1))
			return true;
	return false;
}

/* One character of the path: a UTF-8 sequence is one character to '?' and classes. */
static const char *next_char(const char *s, const char *end)
{
	s++;
	while (s < end && ((unsigned char)*s & 0xc0) == 0x80)
		s++;
	return s;
}

static bool glob(struct match *m, const char *p, const char *s)
{
	while (*p) {
		if (s == m->end && m->partial)
			return true;
		switch (*p) {
		case '*':
			if (p[1] == '*')
				return star2(m, p + 2, s);
			return star(m, p + 1, s);
		case '?':
			if (s == m->end || *s == '/')
				return false;
			p++;
			s = next_char(s, m->end);
			break;
		case '[':
			if (s == m->end || !class_match(p, (unsigned char)*s, &p))
				return false;
			s = next_char(s, m->end);
			break;
		case '\\':
			p++; /* a checked pattern has a character after it */
			/* fall through */
		default:
			if (s == m->end || *p != *s)
				return false;
			p++;
			s++;
		}
	}
	return s == m->end;
}

/* Whether pat matches all of [path, end). */
static bool matches(const char *pat, const char *path, const char *end, bool partial)
{
	struct match m = { .pat = pat, .path = path, .end = end, .partial = partial };
	bool r = glob(&m, pat, path);

	free(m.failed);
	return r;
}

/* The pattern matches path or one of its parent directories (Docker's rule: an excluded
 * directory takes everything below it). */
static bool match_or_parent(const char *pat, const char *path)
{
	const char *end = path + strlen(path), *q;

	if (matches(pat, path, end, false))
		return true;
	for (q = path; q < end; q++)
		if (*q == '/' && q > path && matches(pat, path, q, false))
			return true;
	return false;
}

bool dockerignore_excluded(const struct dockerignore *di, const char *path)
{
	bool excluded = false;
	size_t i;

	for (i = 0; i < di->n; i++) {
		const struct pattern *pt = &di->v[i];

		/* An exclusion only matters while not excluded, an exception only when excluded. */
		if (pt->exception != excluded)
			continue;
		if (match_or_parent(pt->text, path))
			excluded = !pt->exception;
	}
	return excluded;
}

bool dockerignore_may_include_under(const struct dockerignore *di, const char *dir)
{
	_cleanup_free_ char *slash = NULL;
	size_t i;

	if (asprintf(&slash, "%s/", dir) < 0)
		return true; /* out of memory: look, rather than lose files */
	for (i = 0; i < di->n; i++) {
		const char *pat = di->v[i].text;

		if (!di->v[i].exception)
			continue;
		if (match_or_parent(pat, dir) || matches(pat, slash, slash + strlen(slash), true))
			return true;
	}
	return false;
}

/* ---- patterns ------------------------------------------------------- */

/* One character of a class at *q, moved past it: -1 for none, a bare '-' or ']' (Go's
 * filepath.Match rules). */
static int check_class_char(const char **q)
{
	if (!**q || **q == '-' || **q == ']')
		return -1;
	if (**q == '\\' && !*++*q)
		return -1;
	++*q;
	return 0;
}

/* A class from '[' at *p: *p moved past its ']'.  -1 when malformed: no range, or not
 * closed. */
static int check_class(const char **p)
{
	const char *q = *p + 1;
	int ranges;

	if (*q == '^')
		q++;
	for (ranges = 0;; ranges++) {
		if (*q == ']' && ranges) {
			*p = q + 1;
			return 0;
		}
		if (check_class_char(&q) < 0)
			return -1;
		if (*q == '-') {
			q++;
			if (check_class_char(&q) < 0)
				return -1;
		}
	}
}

static int check_pattern(const char *pat, space_err *e)
{
	const char *p = pat;

	while (*p) {
		if (*p == '[') {
			if (check_class(&p) < 0)
				return err_set(e, EINVAL, "bad pattern '%s': a malformed [...] class", pat);
			continue;
		}
		if (*p == '\\' && !p[1])
			return err_set(e, EINVAL, "bad pattern '%s': it ends in '\\'", pat);
		p += *p == '\\' ? 2 : 1;
	}
	return 0;
}

/* In place: s has room for 2 bytes at least ("" becomes "."). */
static void clean_in_place(char *s)
{
	bool rooted = s[0] == '/';
	char *r = s, *w = s;
	size_t floor = rooted ? 1 : 0; /* where ".." may not go back past */

	if (rooted)
		*w++ = *r++;
	while (*r) {
		size_t n = strcspn(r, "/");

		if (n == 0 || (n == 1 && r[0] == '.')) {
			/* empty or "." */
		} else if (n == 2 && r[0] == '.' && r[1] == '.') {
			if ((size_t)(w - s) > floor) {
				while ((size_t)(w - s) > floor && *--w != '/')
					;
			} else if (!rooted) {
				if (w > s)
					*w++ = '/';
				memcpy(w, "..", 2);
				w += 2;
				floor = (size_t)(w - s);
			}
		} else {
			if ((size_t)(w - s) > (rooted ? 1u : 0u))
				*w++ = '/';
			memmove(w, r, n);
			w += n;
		}
		r += n;
		if (*r == '/')
			r++;
	}
	if (w == s)
		*w++ = '.';
	*w = '\0';
}

char *dockerignore_clean(const char *path)
{
	size_t n = strlen(path);
	char *s = malloc(n + 2);

	if (s) {
		memcpy(s, path, n + 1);
		clean_in_place(s);
	}
	return s;
}

static char *trim(char *s)
{
	char *end = s + strlen(s);

	while (isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

int dockerignore_add(struct dockerignore *di, const char *pattern, space_err *e)
{
	_cleanup_free_ char *copy = strdup(pattern);
	char *p;
	bool exception;

	if (!copy)
		return err_set(e, ENOMEM, "out of memory");
	p = trim(copy);
	if (!*p)
		return 0;
	exception = *p == '!';
	if (exception) {
		p = trim(p + 1);
		if (!*p)
			return err_set(e, EINVAL, "'!' without a pattern");
	}
	clean_in_place(p); /* not empty: it only shrinks */
	if (p[0] == '/' && p[1])
		p++;
	if (check_pattern(p, e) < 0)
		return -1;
	if (di->n == di->cap) {
		size_t cap = di->cap ? di->cap * 2 : 16;
		struct pattern *v = realloc(di->v, cap * sizeof(*v));

		if (!v)
			return err_set(e, ENOMEM, "out of memory");
		di->v = v;
		di->cap = cap;
	}
	if (!(di->v[di->n].text = strdup(p)))
		return err_set(e, ENOMEM, "out of memory");
	di->v[di->n++].exception = exception;
	return 0;
}

/* Drop the patterns from index `keep` on (a file that turned out bad). */
static void truncate_to(struct dockerignore *di, size_t keep)
{
	while (di->n > keep)
		free(di->v[--di->n].text);
}

int dockerignore_parse(struct dockerignore *di, const char *name, const char *text, size_t len,
		       space_err *e)
{
	const char *p = text, *end = text + len;
	size_t keep = di->n;
	int line = 0;

	if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		_cleanup_free_ char *l = NULL;

		line++;
		if (n && p[n - 1] == '\r')
			n--;
		if (memchr(p, '\0', n)) {
			truncate_to(di, keep);
			return err_set(e, EINVAL, "%s:%d: a NUL byte", name, line);
		}
		/* A comment only where the line starts with '#', before trimming (Docker). */
		if (n && p[0] != '#') {
			if (!(l = strndup(p, n)) || dockerignore_add(di, l, e) < 0) {
				truncate_to(di, keep);
				if (!l)
					return err_set(e, ENOMEM, "out of memory");
				return err_wrap(e, "%s:%d", name, line);
			}
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}
