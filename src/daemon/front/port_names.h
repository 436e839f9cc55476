/* port_names.h -- how clients name a sandbox's port (docs/design/ports.md): the URL
 * {scheme}://{port}-{id}.{--ports-domain}[:{data-plane port}]/ every front end hands out (/v1's
 * ports routes, E2B's domain, the browser page), made once here (pure; unit-tested) */
#ifndef SPACE_FRONT_PORT_NAMES_H
#define SPACE_FRONT_PORT_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* "http://{port}-{id}.{domain}:{data port}/" from the data plane's URL (its scheme and port);
 * id "{id}" and port 0 give the pattern. */
void port_url(const char *data_url, const char *domain, uint16_t port, const char *id, char *out, size_t len);
/* What E2B's SDKs put after "{port}-{id}." (their sandbox domain): the domain and the data
 * plane's port, "localhost:7071". */
void port_domain(const char *data_url, const char *domain, char *out, size_t len);

/* "ws://DATA/v1/sandboxes/{id}/ports/{port}/tunnel" (wss:// for an https:// data plane): the
 * WebSocket that carries one TCP connection to the port. */
void port_tunnel_url(const char *data_url, const char *id, uint16_t port, char *out, size_t len);

#endif
