/* test_cli_dockerfile.c -- a Dockerfile as `spacectl template build` turns it into a build
 * request: every instruction's mapping; continuations, comments, blank lines, the escape
 * directive, CRLF and a BOM; ARG before and after FROM, --build-arg, ENV and ARG substitution
 * with defaults and quotes (not in RUN, whose shell gets the ARGs exported); exec and shell
 * forms; CMD and ENTRYPOINT combined and quoted for a shell; refused instructions, flags,
 * heredocs, multi-stage builds and sources outside the context, each with the line of the
 * instruction's first line; wildcard sources resolved against the context's paths; -t
 * NAME[:TAG] checked as the daemon checks names and tags (recipe_name_ok, recipe_tag_ok) */
#include <stdbool.h>
#include <string.h>

#include "cli/dockerfile.h"
#include "harness.h"

static struct dockerfile df;
static char warnings[4096];

static void on_warn(const char *msg, void *arg)
{
	(void)arg;
	snprintf(warnings + strlen(warnings), sizeof(warnings) - strlen(warnings), "%s\n", msg);
}

/* Parse text with build args (a JSON object, or NULL); df holds the result. */
static int parse(const char *text, const char *args, space_err *e)
{
	json_t *ba = args ? json_loads(args, 0, NULL) : NULL;
	int rc;

	dockerfile_free(&df);
	warnings[0] = '\0';
	rc = dockerfile_parse(NULL, text, strlen(text), ba, on_warn, NULL, &df, e);
	json_decref(ba);
	return rc;
}

static bool json_is(const json_t *got, const char *want, const char *what)
{
	json_error_t jerr;
	json_t *w = json_loads(want, 0, &jerr);
	bool ok = w && json_equal((json_t *)got, w);

	if (!w)
		NOTE("bad expected JSON for %s: %s", what, jerr.text);
	if (!ok) {
		char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);

		NOTE("%s:\n#   got  %s\n#   want %s", what, g ? g : "(null)", want);
		free(g);
	}
	json_decref(w);
	return ok;
}

/* The request for text is want. */
static bool req_is(const char *text, const char *args, const char *want)
{
	space_err e = { 0 };

	if (parse(text, args, &e) < 0) {
		NOTE("parse failed: %s\n# text: %s", e.msg, text);
		return false;
	}
	return json_is(df.req, want, "request");
}

/* text is refused with exactly msg. */
static bool refused(const char *text, const char *msg)
{
	space_err e = { 0 };

	if (parse(text, NULL, &e) == 0) {
		NOTE("accepted, expected: %s", msg);
		return false;
	}
	if (strcmp(e.msg, msg) != 0) {
		NOTE("error:\n#   got  %s\n#   want %s", e.msg, msg);
		return false;
	}
	return true;
}

static const char *start_of(void)
{
	return json_string_value(json_object_get(json_object_get(df.req, "start"), "cmd"));
}

/* ---- instructions --------------------------------------------------- */

static void test_from_run(void)
{
	EXPECT(req_is("FROM base\nRUN apt-get install -y jq\nRUN [\"echo\", \"hi there\"]\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"apt-get install -y jq\"},"
		      "{\"run\":[\"echo\",\"hi there\"]}]}"));
	EXPECT(json_is(df.meta, "[{\"line\":2,\"text\":\"RUN apt-get install -y jq\"},"
				"{\"line\":3,\"text\":\"RUN [\\\"echo\\\", \\\"hi there\\\"]\"}]",
		       "meta"));
	EXPECT(df.archive == NULL);
	EXPECT(df.from_line == 1);
	EXPECT(req_is("# a comment\nARG V=1\n\nFROM myenv:v1 AS build\n", NULL,
		      "{\"from\":\"myenv:v1\",\"steps\":[]}"));
	EXPECT(df.from_line == 4);
	EXPECT(req_is("from sha256:abc as x\n", NULL, "{\"from\":\"sha256:abc\",\"steps\":[]}"));
	/* Not JSON after all: the shell form, as Docker takes it. */
	EXPECT(req_is("FROM base\nRUN [ -f x ] && echo y\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"[ -f x ] && echo y\"}]}"));
}

static void test_case_crlf_bom(void)
{
	EXPECT(req_is("\xef\xbb\xbf" "from base\r\nrUn make\r\nWorkDir /w\r\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"make\"},{\"workdir\":\"/w\"}]}"));
}

static void test_continuations_comments(void)
{
	const char *text = "# a comment\n"
			   "FROM base\n"
			   "\n"
			   "run apt-get update && \\\n"
			   "    # a comment inside\n"
			   "    apt-get install -y \\\n"
			   "\n"
			   "      jq\n"
			   "RUN echo one \\   \n"
			   "two\n"
			   "  # indented comment\n"
			   "  RUN last\\\n";

	EXPECT(req_is(text, NULL,
		      "{\"from\":\"base\",\"steps\":["
		      "{\"run\":\"apt-get update &&     apt-get install -y       jq\"},"
		      "{\"run\":\"echo one two\"},{\"run\":\"last\"}]}"));
	EXPECT(json_is(df.meta, "[{\"line\":4,\"text\":\"RUN apt-get update && apt-get install -y jq\"},"
				"{\"line\":9,\"text\":\"RUN echo one two\"},"
				"{\"line\":12,\"text\":\"RUN last\"}]",
		       "meta"));
}

static void test_escape_directive(void)
{
	space_err e = { 0 };

	EXPECT(req_is("# escape=`\nFROM base\nRUN dir c:\\ `\n    && echo hi\nENV P=C:\\dir Q=a`\"b\n",
		      NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"dir c:\\\\     && echo hi\"},"
		      "{\"env\":{\"P\":\"C:\\\\dir\",\"Q\":\"a\\\"b\"}}]}"));
	/* Spaces, case, and syntax= beside it. */
	EXPECT(req_is("# syntax=docker/dockerfile:1\n#  ESCAPE = `\nFROM base\nRUN a `\n b\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"a  b\"}]}"));
	/* After a comment (or a blank line) it is only a comment. */
	EXPECT(req_is("# hello\n# escape=`\nFROM base\nRUN a \\\n b\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"a  b\"}]}"));
	EXPECT(req_is("\n# escape=`\nFROM base\nRUN a \\\n b\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"a  b\"}]}"));
	EXPECT(refused("# escape=`\n# escape=\\\nFROM base\n",
		       "Dockerfile:2: only one escape parser directive may be used"));
	EXPECT(refused("# escape=x\nFROM base\n",
		       "Dockerfile:1: the escape directive takes ` or \\, not 'x'"));
	EXPECT(parse("# directive=unknown\n# escape=`\nFROM base\n", NULL, &e) == 0);
}

static void test_args_and_substitution(void)
{
	const char *text = "ARG BASE=base\n"
			   "ARG TAG\n"
			   "FROM ${BASE}:${TAG:-latest}\n"
			   "ARG TAG\n"
			   "ARG VERSION=1.2\n"
			   "ENV APP_HOME=/opt/app V=${VERSION} U=$UNSET. D=${UNSET:-dflt} "
			   "P=${VERSION:+set} E=${EMPTY-x}\n"
			   "WORKDIR $APP_HOME\n"
			   "RUN echo $VERSION \"${TAG}\"\n";

	EXPECT(req_is(text, NULL,
		      "{\"from\":\"base:latest\",\"steps\":["
		      "{\"env\":{\"APP_HOME\":\"/opt/app\",\"V\":\"1.2\",\"U\":\".\",\"D\":\"dflt\","
		      "\"P\":\"set\",\"E\":\"x\"}},"
		      "{\"workdir\":\"/opt/app\"},"
		      "{\"run\":\"export VERSION='1.2'; echo $VERSION \\\"${TAG}\\\"\"}]}"));
	EXPECT(warnings[0] == '\0');
	EXPECT(req_is(text, "{\"TAG\":\"v2\",\"VERSION\":\"it's\",\"NOPE\":\"1\"}",
		      "{\"from\":\"base:v2\",\"steps\":["
		      "{\"env\":{\"APP_HOME\":\"/opt/app\",\"V\":\"it's\",\"U\":\".\",\"D\":\"dflt\","
		      "\"P\":\"set\",\"E\":\"x\"}},"
		      "{\"workdir\":\"/opt/app\"},"
		      "{\"run\":\"export TAG='v2' VERSION='it'\\\\''s'; echo $VERSION \\\"${TAG}\\\"\"}]}"));
	EXPECT(strcmp(warnings, "--build-arg NOPE: no ARG of Dockerfile takes it\n") == 0);
	/* A global ARG needs redeclaring in the stage; its default comes along. */
	EXPECT(req_is("ARG X=1\nFROM base\nWORKDIR /a$X\nARG X\nWORKDIR /b$X\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"workdir\":\"/a\"},{\"workdir\":\"/b1\"}]}"));
	/* ENV wins over ARG, and a RUN is not given an ARG that an ENV sets. */
	EXPECT(req_is("FROM base\nARG A=arg\nENV A=env\nUSER $A\nRUN x\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"env\":{\"A\":\"env\"}},{\"user\":\"env\"},"
		      "{\"run\":\"x\"}]}"));
	/* Proxies need no ARG. */
	EXPECT(req_is("FROM base\nRUN x\n", "{\"http_proxy\":\"http://p:3128\"}",
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"export http_proxy='http://p:3128'; x\"}]}"));
	EXPECT(warnings[0] == '\0');
}

static void test_env_forms(void)
{
	EXPECT(req_is("FROM base\nENV k=v k2=\"v 2\" k3='$lit' k4=a\\ b k5=\"q\\\"x\"\n"
		      "ENV A=1 B=x$A\nENV C=$A\nENV LEGACY /usr/bin:$NOPE and more\n",
		      NULL,
		      "{\"from\":\"base\",\"steps\":["
		      "{\"env\":{\"k\":\"v\",\"k2\":\"v 2\",\"k3\":\"$lit\",\"k4\":\"a b\",\"k5\":\"q\\\"x\"}},"
		      "{\"env\":{\"A\":\"1\",\"B\":\"x\"}},{\"env\":{\"C\":\"1\"}},"
		      "{\"env\":{\"LEGACY\":\"/usr/bin: and more\"}}]}"));
	EXPECT(refused("FROM base\nENV lonely\n",
		       "Dockerfile:2: ENV lonely needs a value: ENV name=value"));
	EXPECT(refused("FROM base\nENV a=1 b\n", "Dockerfile:2: ENV: 'b' is not name=value"));
	EXPECT(refused("FROM base\nENV =x\n", "Dockerfile:2: ENV: a name is empty"));
}

static void test_copy_add(void)
{
	const char *text = "FROM base\n"
			   "COPY app/ /opt/app\n"
			   "COPY --chown=app:app a.txt b.txt /srv\n"
			   "WORKDIR /work\n"
			   "COPY [\"my file.txt\", \"./\"]\n"
			   "COPY ./x/../y rel/\n"
			   "ADD local.tgz /tmp/\n"
			   "copy . .\n"
			   "COPY /abs ../up\n";

	EXPECT(req_is(text, NULL,
		      "{\"from\":\"base\",\"steps\":["
		      "{\"copy\":{\"src\":\"app\",\"dest\":\"/opt/app\"}},"
		      "{\"copy\":{\"src\":\"a.txt\",\"dest\":\"/srv/\",\"chown\":\"app:app\"}},"
		      "{\"copy\":{\"src\":\"b.txt\",\"dest\":\"/srv/\",\"chown\":\"app:app\"}},"
		      "{\"workdir\":\"/work\"},"
		      "{\"copy\":{\"src\":\"my file.txt\",\"dest\":\"/work/\"}},"
		      "{\"copy\":{\"src\":\"y\",\"dest\":\"/work/rel/\"}},"
		      "{\"copy\":{\"src\":\"local.tgz\",\"dest\":\"/tmp/\"}},"
		      "{\"copy\":{\"src\":\".\",\"dest\":\"/work/\"}},"
		      "{\"copy\":{\"src\":\"abs\",\"dest\":\"/up\"}}]}"));
	EXPECT(json_is(json_array_get(df.meta, 2), "{\"line\":3,\"text\":\"COPY --chown=app:app b.txt /srv/\"}",
		       "meta[2]"));
	EXPECT(strcmp(warnings, "Dockerfile:7: ADD local.tgz: the archive is copied as it is, "
				"not extracted\n") == 0);
	EXPECT(dockerfile_has_copy(&df));
	/* Without a WORKDIR the destination stays relative: the daemon knows the base's. */
	EXPECT(req_is("FROM base\nARG D=dst\nCOPY a $D\nCOPY --chown=${U:-1000} b ./d/\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"copy\":{\"src\":\"a\",\"dest\":\"dst\"}},"
		      "{\"copy\":{\"src\":\"b\",\"dest\":\"d/\",\"chown\":\"1000\"}}]}"));
	EXPECT(req_is("FROM base\nRUN x\n", NULL, "{\"from\":\"base\",\"steps\":[{\"run\":\"x\"}]}"));
	EXPECT(!dockerfile_has_copy(&df));
}

static void test_copy_refused(void)
{
	EXPECT(refused("FROM base\nCOPY ../secret /x\n",
		       "Dockerfile:2: COPY ../secret: the source is outside the build context"));
	EXPECT(refused("FROM base\nRUN x\nCOPY a/../../b /x\n",
		       "Dockerfile:3: COPY a/../../b: the source is outside the build context"));
	EXPECT(refused("FROM base\nCOPY a ../x\n",
		       "Dockerfile:2: COPY ../x: a relative path out of the base's workdir (set an "
		       "absolute WORKDIR first)"));
	EXPECT(refused("FROM base\nCOPY --from=build /a /b\n",
		       "Dockerfile:2: COPY --from is not supported (one stage only)"));
	EXPECT(refused("FROM base\nCOPY --chmod=644 a /b\n", "Dockerfile:2: COPY --chmod is not supported"));
	EXPECT(refused("FROM base\nADD --checksum=sha256:x a /b\n",
		       "Dockerfile:2: ADD --checksum is not supported"));
	EXPECT(refused("FROM base\nADD https://example.com/x.tgz /tmp/\n",
		       "Dockerfile:2: ADD of a URL is not supported (https://example.com/x.tgz)"));
	EXPECT(refused("FROM base\nADD git@github.com:a/b.git /src\n",
		       "Dockerfile:2: ADD of a URL is not supported (git@github.com:a/b.git)"));
	EXPECT(refused("FROM base\nCOPY a\n", "Dockerfile:2: COPY needs a source and a destination"));
	EXPECT(refused("FROM base\nARG E\nCOPY a $E\n", "Dockerfile:3: COPY: the destination is empty"));
	EXPECT(req_is("FROM base\nCOPY / \"\" /x\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"copy\":{\"src\":\".\",\"dest\":\"/x/\"}},"
		      "{\"copy\":{\"src\":\".\",\"dest\":\"/x/\"}}]}"));
	EXPECT(refused("FROM base\nCOPY <<EOF /x\nhello\nEOF\n",
		       "Dockerfile:2: heredocs (<<EOF) are not supported"));
	EXPECT(refused("FROM base\nRUN x\nRUN <<-'EOT' bash\necho\nEOT\n",
		       "Dockerfile:3: heredocs (<<EOF) are not supported"));
	EXPECT(refused("FROM base\nCOPY [\"a\", 1]\n",
		       "Dockerfile:2: COPY: the JSON form holds strings only"));
	/* A here-string is no heredoc. */
	EXPECT(req_is("FROM base\nRUN cat <<< hi\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"run\":\"cat <<< hi\"}]}"));
}

static void test_workdir_user(void)
{
	EXPECT(req_is("FROM base\nWORKDIR app\nWORKDIR /srv\nWORKDIR data\nWORKDIR ../logs\n"
		      "WORKDIR \"/my dir\"\nUSER app:staff\nUSER 1000\n",
		      NULL,
		      "{\"from\":\"base\",\"steps\":[{\"workdir\":\"app\"},{\"workdir\":\"/srv\"},"
		      "{\"workdir\":\"/srv/data\"},{\"workdir\":\"/srv/logs\"},{\"workdir\":\"/my dir\"},"
		      "{\"user\":\"app\"},{\"user\":\"1000\"}]}"));
	EXPECT(refused("FROM base\nUSER :staff\n", "Dockerfile:2: USER needs a user"));
	EXPECT(refused("FROM base\nWORKDIR ..\n",
		       "Dockerfile:2: WORKDIR ..: a relative path out of the base's workdir (set an "
		       "absolute WORKDIR first)"));
}

static void test_cmd_entrypoint(void)
{
	EXPECT(req_is("FROM base\nCMD [\"python\", \"app.py\", \"it's\"]\n", NULL,
		      "{\"from\":\"base\",\"steps\":[],\"start\":{\"cmd\":\"python app.py 'it'\\\\''s'\"}}"));
	EXPECT(req_is("FROM base\nCMD python app.py --name \"$X\"\n", NULL,
		      "{\"from\":\"base\",\"steps\":[],\"start\":{\"cmd\":\"python app.py --name \\\"$X\\\"\"}}"));
	EXPECT(parse("FROM base\nENTRYPOINT [\"/entry.sh\"]\nCMD [\"serve\", \"--port=80\"]\n", NULL,
		     &(space_err){ 0 }) == 0 &&
	       start_of() && strcmp(start_of(), "/entry.sh serve --port=80") == 0);
	EXPECT(parse("FROM base\nCMD echo hi\nENTRYPOINT [\"tini\", \"--\"]\n", NULL,
		     &(space_err){ 0 }) == 0 &&
	       start_of() && strcmp(start_of(), "tini -- /bin/sh -c 'echo hi'") == 0);
	/* A shell-form ENTRYPOINT ignores CMD. */
	EXPECT(parse("FROM base\nENTRYPOINT exec nginx -g 'daemon off;'\nCMD [\"x\"]\n", NULL,
		     &(space_err){ 0 }) == 0 &&
	       start_of() && strcmp(start_of(), "exec nginx -g 'daemon off;'") == 0);
	/* The last of each wins. */
	EXPECT(parse("FROM base\nCMD a\nENTRYPOINT [\"e1\"]\nCMD [\"b\"]\nENTRYPOINT [\"e2\"]\n", NULL,
		     &(space_err){ 0 }) == 0 &&
	       start_of() && strcmp(start_of(), "e2 b") == 0);
	EXPECT(req_is("FROM base\nCMD [\"a\"]\nCMD []\n", NULL, "{\"from\":\"base\",\"steps\":[]}"));
	EXPECT(refused("FROM base\nCMD\n", "Dockerfile:2: CMD needs a command"));
}

static void test_shell_join(void)
{
	static const struct {
		const char *argv, *line;
	} cases[] = {
		{ "[\"echo\",\"it's\"]", "echo 'it'\\''s'" },
		{ "[\"FOO=bar\",\"x=y\"]", "'FOO=bar' x=y" },
		{ "[\"if\",\"if\"]", "'if' if" },
		{ "[\"\",\"a b\",\"$HOME\",\"semi;\",\"*\",\"~\",\"a\\tb\"]",
		  "'' 'a b' '$HOME' 'semi;' '*' '~' 'a\tb'" },
		{ "[\"/usr/bin/env\",\"-u\",\"X\",\"a@b%c+d:e,f.g/h-i_j\"]",
		  "/usr/bin/env -u X a@b%c+d:e,f.g/h-i_j" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *a = json_loads(cases[i].argv, 0, NULL);
		char *s = a ? dockerfile_shell_join(a) : NULL;

		CHECK(s && strcmp(s, cases[i].line) == 0, "shell_join %s -> %s (got %s)", cases[i].argv,
		      cases[i].line, s ? s : "(null)");
		free(s);
		json_decref(a);
	}
}

static void test_expose_label_maintainer(void)
{
	EXPECT(req_is("ARG P=5000\nFROM base\nARG P\nEXPOSE 8000 9000/tcp\nEXPOSE 8000 7000-7002 $P 80/TCP\n",
		      NULL,
		      "{\"from\":\"base\",\"steps\":[],\"expose\":[8000,9000,7000,7001,7002,5000,80]}"));
	EXPECT(refused("FROM base\nEXPOSE 53/udp\n", "Dockerfile:2: EXPOSE 53/udp: only TCP ports are supported"));
	EXPECT(refused("FROM base\nEXPOSE 0\n",
		       "Dockerfile:2: EXPOSE 0: not a port (1 to 65535) or range of ports"));
	EXPECT(refused("FROM base\nEXPOSE 9-3\n",
		       "Dockerfile:2: EXPOSE 9-3: not a port (1 to 65535) or range of ports"));
	EXPECT(refused("FROM base\nEXPOSE 1-100\n", "Dockerfile:2: more than 64 ports exposed"));
	EXPECT(req_is("FROM base\nLABEL a=b \"com.x.y\"=\"v 1\"\nLABEL a=c\nMAINTAINER me <me@x>\n", NULL,
		      "{\"from\":\"base\",\"steps\":[],\"labels\":{\"a\":\"c\",\"com.x.y\":\"v 1\"}}"));
	EXPECT(strcmp(warnings, "Dockerfile:4: MAINTAINER is deprecated and ignored (use LABEL)\n") == 0);
}

static void test_refused_lines(void)
{
	EXPECT(refused("FROM base\nRUN ok\nHEALTHCHECK --interval=5s \\\n  CMD curl -f http://x/\n",
		       "Dockerfile:3: HEALTHCHECK is not supported"));
	EXPECT(refused("FROM base\n\n# c\nRUN a \\\n  b\nvolume /data\n", "Dockerfile:6: VOLUME is not supported"));
	EXPECT(refused("FROM base\nonbuild RUN x\n", "Dockerfile:2: ONBUILD is not supported"));
	EXPECT(refused("FROM base\nSTOPSIGNAL SIGTERM\n", "Dockerfile:2: STOPSIGNAL is not supported"));
	EXPECT(refused("FROM base\nSHELL [\"/bin/bash\", \"-c\"]\n", "Dockerfile:2: SHELL is not supported"));
	EXPECT(refused("FROM base\nFROBNICATE x\n", "Dockerfile:2: FROBNICATE is not supported"));
	EXPECT(refused("FROM base\nRUN --mount=type=cache,target=/root/.cache \\\n  pip install x\n",
		       "Dockerfile:2: RUN --mount is not supported"));
	EXPECT(refused("FROM base\nRUN --network=none make\n", "Dockerfile:2: RUN --network is not supported"));
	EXPECT(refused("FROM base\nRUN [\"a\", {}]\n", "Dockerfile:2: RUN: the JSON form holds strings only"));
	EXPECT(refused("FROM base\nRUN\n", "Dockerfile:2: RUN needs a command"));
	EXPECT(refused("FROM base AS one\nRUN x\n# c\nFROM base\n",
		       "Dockerfile:4: multi-stage builds are not supported (a second FROM)"));
	EXPECT(refused("FROM --platform=linux/arm64 base\n", "Dockerfile:1: FROM --platform is not supported"));
	EXPECT(refused("FROM base extra\n", "Dockerfile:1: FROM takes an image and an optional AS name"));
	EXPECT(refused("# c\nRUN x\nFROM base\n", "Dockerfile:2: RUN before FROM (only ARG may come before it)"));
	EXPECT(refused("ARG X\n", "Dockerfile: no FROM instruction"));
	EXPECT(refused("", "Dockerfile: no FROM instruction"));
	{
		static const char nul[] = "FROM base\nRUN a\0b\n";
		struct dockerfile d2;
		space_err e = { 0 };

		EXPECT(dockerfile_parse("x", nul, sizeof(nul) - 1, NULL, NULL, NULL, &d2, &e) < 0 &&
		       strcmp(e.msg, "x:2: a NUL byte") == 0);
	}
}

static void test_substitution_errors(void)
{
	EXPECT(refused("FROM base\nENV A=\"${B:?B is required}\"\n", "Dockerfile:2: B: B is required"));
	/* Docker splits ENV at blanks outside quotes, ${...} or not. */
	EXPECT(refused("FROM base\nENV A=${B:-x y}\n", "Dockerfile:2: ENV: 'y}' is not name=value"));
	EXPECT(refused("FROM base\nENV B=\nENV A=${B?}\nENV C=${B:?}\n", "Dockerfile:4: B: not set"));
	EXPECT(refused("FROM base\nWORKDIR ${X\n", "Dockerfile:2: a substitution without its '}'"));
	EXPECT(refused("FROM base\nWORKDIR /${}\n", "Dockerfile:2: bad substitution"));
	EXPECT(refused("FROM base\nWORKDIR /${X%y}\n", "Dockerfile:2: unsupported substitution ${X%...}"));
	EXPECT(refused("FROM base\nENV a=\"x\n", "Dockerfile:2: a double quote without its end"));
	EXPECT(refused("FROM base\nUSER 'x\n", "Dockerfile:2: a single quote without its end"));
	EXPECT(refused("ARG I\nFROM $I\n", "Dockerfile:2: FROM $I: no image once substituted"));
	/* A '$' before nothing it could name stays; digits and specials name nothing set. */
	EXPECT(req_is("FROM base\nENV a=$ b=x$1y c=${X:-$} d=\\$X\n", NULL,
		      "{\"from\":\"base\",\"steps\":[{\"env\":{\"a\":\"$\",\"b\":\"xy\",\"c\":\"$\",\"d\":\"$X\"}}]}"));
}

static void test_archive_base(void)
{
	space_err e = { 0 };

	EXPECT(req_is("ARG IMG=img\nFROM oci-archive:./${IMG}.tar\nRUN x\n", NULL,
		      "{\"steps\":[{\"run\":\"x\"}]}"));
	EXPECT(df.archive && strcmp(df.archive, "./img.tar") == 0 && df.from_line == 2);
	EXPECT(parse("FROM docker-archive:/abs/image.tar\n", NULL, &e) == 0 && df.archive &&
	       strcmp(df.archive, "/abs/image.tar") == 0 && !json_object_get(df.req, "from"));
	EXPECT(refused("FROM oci-archive:\n", "Dockerfile:1: FROM oci-archive:: the archive's path is missing"));
}

/* -t ARG gives name and tag, or is refused with msg. */
static bool tag_is(const char *arg, const char *name, const char *tag)
{
	char n[DF_NAME_MAX + 1] = "", t[DF_TAG_MAX + 1] = "";
	space_err e = { 0 };

	if (dockerfile_tag_arg(arg, n, t, &e) < 0) {
		NOTE("-t %.60s refused: %s", arg, e.msg);
		return false;
	}
	if (strcmp(n, name) != 0 || strcmp(t, tag) != 0) {
		NOTE("-t %.60s: got %s + %s, want %s + %s", arg, n, t, name, tag);
		return false;
	}
	return true;
}

static bool tag_refused(const char *arg, const char *what)
{
	char n[DF_NAME_MAX + 1], t[DF_TAG_MAX + 1];
	space_err e = { 0 };

	if (dockerfile_tag_arg(arg, n, t, &e) == 0) {
		NOTE("-t %.60s accepted, expected a refusal of its %s", arg, what);
		return false;
	}
	if (!strstr(e.msg, what)) {
		NOTE("-t %.60s: %s (expected one about its %s)", arg, e.msg, what);
		return false;
	}
	return true;
}

/* The daemon's rules: a name [a-z0-9][a-z0-9._-]{0,62}, a tag [A-Za-z0-9_][A-Za-z0-9._-]{0,126}. */
static void test_tag_args(void)
{
	char name63[64], name64[65], tag127[128], tag128[129], arg[256];

	memset(name63, 'n', 63), name63[63] = '\0';
	memset(name64, 'n', 64), name64[64] = '\0';
	memset(tag127, 'T', 127), tag127[127] = '\0';
	memset(tag128, 'T', 128), tag128[128] = '\0';
	EXPECT(tag_is("myenv", "myenv", "latest"));
	EXPECT(tag_is("myenv:v1", "myenv", "v1"));
	EXPECT(tag_is("my.env-2_x:V1.2-rc_3", "my.env-2_x", "V1.2-rc_3"));
	EXPECT(tag_is("0env:_x", "0env", "_x"));
	EXPECT(tag_is(name63, name63, "latest"));
	snprintf(arg, sizeof(arg), "a:%s", tag127);
	EXPECT(tag_is(arg, "a", tag127));
	snprintf(arg, sizeof(arg), "%s:%s", name63, tag127);
	EXPECT(tag_is(arg, name63, tag127));

	EXPECT(tag_refused(name64, "name is 1 to 63"));
	snprintf(arg, sizeof(arg), "a:%s", tag128);
	EXPECT(tag_refused(arg, "tag is 1 to 127"));
	EXPECT(tag_refused("", "name"));
	EXPECT(tag_refused(":v1", "name"));
	EXPECT(tag_refused("MyEnv:v1", "name"));
	EXPECT(tag_refused(".env:v1", "name"));
	EXPECT(tag_refused("-env", "name"));
	EXPECT(tag_refused("_env", "name"));
	EXPECT(tag_refused("my/env:v1", "name"));
	EXPECT(tag_refused("myenv:", "tag"));
	EXPECT(tag_refused("myenv:.v1", "tag"));
	EXPECT(tag_refused("myenv:-v1", "tag"));
	EXPECT(tag_refused("myenv:v:1", "tag"));
	EXPECT(tag_refused("myenv:v 1", "tag"));
	EXPECT(tag_refused("myenv:v/1", "tag"));
}

static void test_resolve_sources(void)
{
	static const char *const paths[] = { "app", "app/main.py", "a.txt", "b.txt", "docs",
					     "docs/x.md", "docs/y.md", "README.md" };
	space_err e = { 0 };

	if (!CHECK(parse("FROM base\nCOPY *.txt /dst\nCOPY --chown=u docs/*.md /d/\nCOPY R*.md /r\n"
			 "COPY app /app\nCOPY . /all\n",
			 NULL, &e) == 0,
		   "parse"))
		return;
	CHECK(dockerfile_resolve_sources(&df, NULL, paths, 8, &e) == 0, "resolve: %s", e.msg);
	EXPECT(json_is(json_object_get(df.req, "steps"),
		       "[{\"copy\":{\"src\":\"a.txt\",\"dest\":\"/dst/\"}},"
		       "{\"copy\":{\"src\":\"b.txt\",\"dest\":\"/dst/\"}},"
		       "{\"copy\":{\"src\":\"docs/x.md\",\"dest\":\"/d/\",\"chown\":\"u\"}},"
		       "{\"copy\":{\"src\":\"docs/y.md\",\"dest\":\"/d/\",\"chown\":\"u\"}},"
		       "{\"copy\":{\"src\":\"README.md\",\"dest\":\"/r\"}},"
		       "{\"copy\":{\"src\":\"app\",\"dest\":\"/app\"}},"
		       "{\"copy\":{\"src\":\".\",\"dest\":\"/all\"}}]",
		       "steps"));
	EXPECT(json_is(df.meta, "[{\"line\":2,\"text\":\"COPY a.txt /dst/\"},"
				"{\"line\":2,\"text\":\"COPY b.txt /dst/\"},"
				"{\"line\":3,\"text\":\"COPY --chown=u docs/x.md /d/\"},"
				"{\"line\":3,\"text\":\"COPY --chown=u docs/y.md /d/\"},"
				"{\"line\":4,\"text\":\"COPY README.md /r\"},"
				"{\"line\":5,\"text\":\"COPY app /app\"},"
				"{\"line\":6,\"text\":\"COPY . /all\"}]",
		       "meta"));
	CHECK(parse("FROM base\nRUN x\nCOPY nope /x\n", NULL, &e) == 0 &&
		      dockerfile_resolve_sources(&df, "ctx/Dockerfile", paths, 8, &e) < 0 &&
		      strcmp(e.msg, "ctx/Dockerfile:3: COPY nope /x: nope is not in the build context "
				    "(missing, or excluded by .dockerignore)") == 0,
	      "a missing source is refused with its line: %s", e.msg);
	CHECK(parse("FROM base\nCOPY *.go /x\n", NULL, &e) == 0 &&
		      dockerfile_resolve_sources(&df, NULL, paths, 8, &e) < 0 &&
		      strcmp(e.msg, "Dockerfile:2: COPY *.go /x: no file in the build context matches") == 0,
	      "a wildcard matching nothing is refused: %s", e.msg);
}

int main(void)
{
	RUN(test_from_run);
	RUN(test_case_crlf_bom);
	RUN(test_continuations_comments);
	RUN(test_escape_directive);
	RUN(test_args_and_substitution);
	RUN(test_env_forms);
	RUN(test_copy_add);
	RUN(test_copy_refused);
	RUN(test_workdir_user);
	RUN(test_cmd_entrypoint);
	RUN(test_shell_join);
	RUN(test_expose_label_maintainer);
	RUN(test_refused_lines);
	RUN(test_substitution_errors);
	RUN(test_archive_base);
	RUN(test_resolve_sources);
	RUN(test_tag_args);
	dockerfile_free(&df);
	return DONE();
}
