/* main.c -- spacectl: global options, then dispatch to one verb */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "keyfile.h"

/* In the order `spacectl help` lists them. */
static const struct ctl_verb *const verbs[] = {
	&ctl_verb_info,     &ctl_verb_templates, &ctl_verb_template, &ctl_verb_pool,     &ctl_verb_create,
	&ctl_verb_ls,       &ctl_verb_exec,      &ctl_verb_cp,       &ctl_verb_logs,
	&ctl_verb_rm,
	&ctl_verb_pause,    &ctl_verb_resume,    &ctl_verb_suspend,  &ctl_verb_restore,
	&ctl_verb_stop,     &ctl_verb_start,     &ctl_verb_wake,     &ctl_verb_timeout,
	&ctl_verb_fork,     &ctl_verb_snapshot,  &ctl_verb_snapshots, &ctl_verb_snapshot_rm,
	&ctl_verb_network,  &ctl_verb_secret,    &ctl_verb_egress,
	&ctl_verb_ports,    &ctl_verb_expose,    &ctl_verb_port_forward,
	&ctl_verb_events,   &ctl_verb_webhook,
	&ctl_verb_mcp,
};
#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

static const struct ctl_verb *find_verb(const char *name)
{
	size_t i;

	for (i = 0; i < NVERBS; i++)
		if (strcmp(verbs[i]->name, name) == 0)
			return verbs[i];
	return NULL;
}

#define USAGE "spacectl [--url URL] [--api-key KEY] [--json] VERB [ARGS...]"

static void usage(FILE *out)
{
	size_t i;

	fprintf(out,
		"usage: " USAGE "\n"
		"\n"
		"Drive a SPACE control plane.\n"
		"\n"
		"Verbs:\n");
	for (i = 0; i < NVERBS; i++)
		fprintf(out, "  %-12s %s\n", verbs[i]->name, verbs[i]->summary);
	fprintf(out,
		"  %-12s %s\n"
		"\n"
		"Global options:\n"
		"  --url URL       control plane base URL (env SPACE_URL, default %s)\n"
		"  --api-key KEY   API key (env SPACE_API_KEY; visible in ps: prefer SPACE_API_KEY_FILE,\n"
		"                  a file of yours with mode 600 holding the key)\n"
		"  --json          print raw JSON responses\n"
		"  -h, --help      this text\n"
		"\n"
		"Exit status: 0 success, 1 API or other failure, 2 usage error;\n"
		"exec exits with the command's status (125 if it could not run it).\n"
		"'spacectl help VERB' describes a verb.\n",
		"help", "show this text, or a verb's options", CTL_DEFAULT_URL);
}

static int usage_error(const char *msg)
{
	if (msg)
		fprintf(stderr, "spacectl: %s\n", msg);
	fprintf(stderr, "usage: %s\nTry 'spacectl help' for more information.\n", USAGE);
	return CTL_EXIT_USAGE;
}

static int help(const char *name)
{
	const struct ctl_verb *v;

	if (!name) {
		usage(stdout);
		return CTL_EXIT_OK;
	}
	v = find_verb(name);
	if (!v) {
		fprintf(stderr, "spacectl: help: unknown verb '%s'\n", name);
		return CTL_EXIT_USAGE;
	}
	ctl_print_help(v, stdout);
	return CTL_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "api-key", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static char key_buf[256];
	struct ctl c = { .prog = "spacectl" };
	const char *url = getenv("SPACE_URL");
	const struct ctl_verb *v;
	char prog[64];
	char *base;
	space_err e = { 0 };
	int opt, rc, vi;

	c.api_key = getenv("SPACE_API_KEY");
	if ((!c.api_key || !*c.api_key) && getenv("SPACE_API_KEY_FILE") && *getenv("SPACE_API_KEY_FILE")) {
		if (keyfile_read(getenv("SPACE_API_KEY_FILE"), key_buf, sizeof(key_buf), &e) < 0) {
			fprintf(stderr, "spacectl: %s\n", e.msg);
			return CTL_EXIT_USAGE;
		}
		c.api_key = key_buf;
	}
	/* '+': stop at the verb; its options are its own. */
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'u':
			url = optarg;
			break;
		case 'k':
			c.api_key = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'h':
			usage(stdout);
			return CTL_EXIT_OK;
		default:
			return usage_error(NULL);
		}
	}
	if (optind >= argc)
		return usage_error("missing verb");
	if (strcmp(argv[optind], "help") == 0) {
		if (argc - optind > 2)
			return usage_error("help takes one verb at most");
		return help(argv[optind + 1]);
	}
	v = find_verb(argv[optind]);
	if (!v) {
		fprintf(stderr, "spacectl: unknown verb '%s'\n", argv[optind]);
		return usage_error(NULL);
	}

	base = ctl_trim_url(url && *url ? url : CTL_DEFAULT_URL);
	if (!base) {
		fprintf(stderr, "spacectl: out of memory\n");
		return CTL_EXIT_FAIL;
	}
	c.url = base;
	c.verb = v->name;
	/* Output to a closed pipe must come back as EPIPE, not kill us
	 * half-way through a request. */
	signal(SIGPIPE, SIG_IGN);
	if (ctl_http_init(&e) < 0) {
		free(base);
		return ctl_fail(&c, &e, CTL_EXIT_FAIL);
	}

	snprintf(prog, sizeof(prog), "spacectl %s", v->name);
	vi = optind;
	argv[vi] = prog;
	optind = 0; /* reinitialise getopt for the verb */
	rc = v->run(&c, argc - vi, argv + vi);
	if (fflush(stdout) != 0 && rc == CTL_EXIT_OK && errno != EPIPE) {
		fprintf(stderr, "spacectl: %s: writing the output: %s\n", c.verb,
			strerror(errno));
		rc = CTL_EXIT_FAIL;
	}
	curl_global_cleanup();
	free(base);
	return rc;
}
