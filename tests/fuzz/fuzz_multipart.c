/* fuzz_multipart.c -- libFuzzer target: the streaming multipart/form-data parser
 * (e2b/multipart.c) that reads POST /files bodies (the E2B SDK's uploads).
 *
 * Input: byte 0 = feed size (1..255, 0 = whole buffer at once), byte 1 = how much of each data
 * event to consume (0 = all); the rest = the body, boundary "fuzzbnd". Besides the sanitizers,
 * the contract is checked: every call consumes at most what it was offered; data lies inside
 * the offered bytes and is never delimiter-bearing; with eof the parser never asks for more;
 * a parser in error or done stays there; part names are NUL-terminated within bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_multipart: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mp m;
	size_t step, take, fed = 0, plen = 0, rounds = 0;
	uint8_t *pend;
	bool ended = false;

	if (size < 2)
		return 0;
	step = data[0] ? data[0] : size;
	take = data[1];
	data += 2;
	size -= 2;
	MUST(mp_init(&m, "fuzzbnd") == 0);
	pend = malloc(size + 1);
	MUST(pend);
	while (!ended) {
		size_t n = size - fed < step ? size - fed : step;
		bool eof;

		memcpy(pend + plen, data + fed, n);
		plen += n;
		fed += n;
		eof = fed == size;
		for (;;) {
			size_t used, dl;
			const uint8_t *d;
			enum mp_event ev = mp_next(&m, pend, plen, eof, &used, &d, &dl);

			MUST(used <= plen);
			MUST(++rounds < 4 * (size + 16) + 64);
			if (ev == MP_DATA) {
				MUST(dl > 0 && d >= pend && d + dl <= pend + plen);
				MUST(used == (size_t)(d - pend) + dl);
				MUST(!memmem(d, dl, "\r\n--fuzzbnd", 11));
				if (take && dl > take)
					used -= dl - take;
			}
			if (ev == MP_PART) {
				MUST(memchr(m.name, '\0', sizeof(m.name)) && memchr(m.filename, '\0', sizeof(m.filename)));
			}
			memmove(pend, pend + used, plen - used);
			plen -= used;
			if (ev == MP_ERROR || ev == MP_DONE) {
				size_t u2, d2;
				const uint8_t *dd;

				MUST(mp_next(&m, pend, plen, eof, &u2, &dd, &d2) == ev);
				ended = true;
				break;
			}
			if (ev == MP_NEED_MORE) {
				MUST(!eof);
				break;
			}
		}
	}
	free(pend);
	return 0;
}
