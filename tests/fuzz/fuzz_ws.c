/* fuzz_ws.c -- libFuzzer target: a WebSocket client's bytes through the daemon's frame receiver
 * (ws_rx_feed in src/daemon/http/ws.c: headers, masking, length encodings, fragments, control
 * frames, close payloads, UTF-8) in pieces of any size.
 *
 * Besides the sanitizers, its contract is checked: it always consumes or reports; a message never
 * exceeds max_message; a text message is UTF-8; an error carries 1002, 1007 or 1009 and stays.
 * Byte 0: the piece size (0: everything at once); byte 1: max_message (1 + byte * 64); the rest:
 * the client's bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "http/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_ws: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_rx rx;
	size_t step, max, at = 0;
	bool failed = false;

	if (size < 2)
		return 0;
	step = data[0] ? data[0] : SIZE_MAX;
	max = 1 + (size_t)data[1] * 64;
	data += 2;
	size -= 2;
	ws_rx_init(&rx, max);
	while (at < size) {
		size_t piece = size - at < step ? size - at : step, used = 0;
		enum ws_rx_ev ev = ws_rx_feed(&rx, data + at, piece, &used);

		MUST(used <= piece);
		if (failed) {
			MUST(ev == WS_RX_ERROR && used == 0);
			break;
		}
		MUST(used > 0 || ev != WS_RX_MORE);
		at += used;
		switch (ev) {
		case WS_RX_TEXT:
			MUST(ws_utf8_valid(rx.msg, rx.msg_len));
			/* fall through */
		case WS_RX_BINARY:
			MUST(rx.msg_len <= max);
			break;
		case WS_RX_PING:
		case WS_RX_PONG:
		case WS_RX_CLOSE:
			MUST(rx.ctl_len <= 125);
			break;
		case WS_RX_ERROR:
			MUST(rx.close_code == 1002 || rx.close_code == 1007 || rx.close_code == 1009);
			failed = true;
			break;
		case WS_RX_MORE:
			break;
		}
	}
	ws_rx_free(&rx);
	return 0;
}
