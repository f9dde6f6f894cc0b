/* xgr/outbound.h — the outbound address policy: which addresses the API calls of rules may
 * connect to (issue 38, finding 5; docs/SECURITY.md "Outbound calls").
 *
 * A rule document is a tenant's: its apiCalls name any URL. Without a policy a tenant's rule could
 * reach whatever the machine running xgr reaches — another daemon on 127.0.0.1, the cloud
 * metadata service on 169.254.169.254, the private network. The policy refuses these by default:
 *
 *   loopback      127.0.0.0/8, ::1
 *   link-local    169.254.0.0/16 (cloud metadata), fe80::/10
 *   private       10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7, fec0::/10
 *   unspecified   0.0.0.0/8, ::
 *   cgnat         100.64.0.0/10 (shared address space)
 *   multicast     224.0.0.0/4, ff00::/8
 *   reserved      240.0.0.0/4, broadcast 255.255.255.255 included
 *
 * IPv6 forms that carry an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
 * NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::) are judged by the IPv4 address they carry.
 * Every other address is allowed. An allow entry (xgr_outbound_policy_allow) permits a range even
 * when it lies in one of the refused classes.
 *
 * The check is made on the resolved address when a connection is opened (the exchange's curl
 * handle installs it: xgr/rule.h), so a name that resolves to a refused address — `localhost`,
 * a name whose DNS answer changes between two lookups — is refused as well; redirects are never
 * followed and proxies from the environment are not used (a proxy would hide the address to check).
 *
 * Thread safety: a policy is built by one thread, then only read (any number of threads).
 */
#ifndef XGR_OUTBOUND_H
#define XGR_OUTBOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "xgr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xgr_outbound_policy xgr_outbound_policy;

/* A new policy: the default (the classes above refused, nothing allowed besides). Never NULL. */
xgr_outbound_policy *xgr_outbound_policy_new(void);
void xgr_outbound_policy_free(xgr_outbound_policy *p);

/* Allow a range: a CIDR ("10.1.0.0/16", "fd00::/8"), an address (a /32 or /128), or one of the
 * words loopback, link-local, private, cgnat, unspecified, multicast, reserved (that class's ranges)
 * and any (every address: the policy refuses nothing). Returns 0, or XGR_EINVAL with *err naming
 * what was expected. */
int xgr_outbound_policy_allow(xgr_outbound_policy *p, const char *spec, xgr_error *err);

/* The policy used where none is given (a NULL policy in a configuration): the default. Static. */
const xgr_outbound_policy *xgr_outbound_default(void);

/* Whether a connection to the address sa (AF_INET or AF_INET6; any other family is refused) is
 * allowed by p (NULL: the default). When it is not, and the pointers are not NULL: *cls is the
 * class that refused it ("loopback", ...; static) and addr (n bytes) gets the address as text. */
bool xgr_outbound_allowed(const xgr_outbound_policy *p, const struct sockaddr *sa, const char **cls, char *addr, size_t n);

#ifdef __cplusplus
}
#endif
#endif
