/*
 * One IPv4 route over rtnetlink, for kubeling's pause (a pod's route to the Service range through the
 * gateway container) and gateway (a local route that makes the whole Service range its own addresses).
 * Header-only so each static program stays a single compilation unit.
 */
#ifndef KUBELING_ROUTE_H
#define KUBELING_ROUTE_H

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Parses "A.B.C.D/N" into a network address (host order bits cleared) and a prefix length. */
static int parse_cidr(const char *text, struct in_addr *net, int *prefix) {
    char buf[32];
    size_t len = strlen(text);
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, text, len + 1);
    char *slash = strchr(buf, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    char *end = NULL;
    long p = strtol(slash + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 32 || inet_pton(AF_INET, buf, net) != 1)
        return -1;
    *prefix = (int)p;
    return 0;
}

static void add_attr(struct nlmsghdr *n, size_t cap, int type, const void *data, size_t len) {
    size_t at = NLMSG_ALIGN(n->nlmsg_len);
    struct rtattr *rta = (struct rtattr *)((char *)n + at);
    if (at + RTA_LENGTH(len) > cap)
        return;
    rta->rta_type = (unsigned short)type;
    rta->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(rta), data, len);
    n->nlmsg_len = (uint32_t)(at + RTA_ALIGN(rta->rta_len));
}

/*
 * Adds (or replaces) `dst/prefix via gw` when gw is given, else `local dst/prefix dev lo` in the local table.
 * Returns 0, or a negative errno.
 */
static int add_route(struct in_addr dst, int prefix, const struct in_addr *gw) {
    struct {
        struct nlmsghdr n;
        struct rtmsg r;
        char attrs[128];
    } req;
    memset(&req, 0, sizeof req);
    req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    req.n.nlmsg_type = RTM_NEWROUTE;
    req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK;
    req.n.nlmsg_seq = 1;
    req.r.rtm_family = AF_INET;
    req.r.rtm_dst_len = (unsigned char)prefix;
    req.r.rtm_protocol = RTPROT_STATIC;
    if (gw != NULL) {
        req.r.rtm_table = RT_TABLE_MAIN;
        req.r.rtm_scope = RT_SCOPE_UNIVERSE;
        req.r.rtm_type = RTN_UNICAST;
    } else {
        req.r.rtm_table = RT_TABLE_LOCAL;
        req.r.rtm_scope = RT_SCOPE_HOST;
        req.r.rtm_type = RTN_LOCAL;
    }
    add_attr(&req.n, sizeof req, RTA_DST, &dst, sizeof dst);
    if (gw != NULL) {
        add_attr(&req.n, sizeof req, RTA_GATEWAY, gw, sizeof *gw);
    } else {
        int lo = (int)if_nametoindex("lo");
        if (lo == 0)
            return -errno;
        add_attr(&req.n, sizeof req, RTA_OIF, &lo, sizeof lo);
    }

    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return -errno;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, &req, req.n.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    char reply[512];
    ssize_t got = recv(fd, reply, sizeof reply, 0);
    int err = got < 0 ? errno : 0;
    close(fd);
    if (got < 0)
        return -err;
    struct nlmsghdr *h = (struct nlmsghdr *)reply;
    if (got >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) && h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA(h);
        return e->error; /* 0 is the ack, else -errno */
    }
    return -EPROTO;
}

#endif
