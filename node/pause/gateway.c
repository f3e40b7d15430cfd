/*
 * kubeling's service gateway: the one container on a cluster's Docker network that owns the whole Service
 * range. Pods route the range to it (see pause's --route); a local route (`local CIDR dev lo`) makes every
 * Service IP its own address, so it can listen on any ClusterIP:port without one address per Service.
 *
 * The node agent (crate::proxy, which computes every line from its table) connects to the control port (on
 * the gateway's own IP) and sends lines:
 *   A AGENT_IP UDP_PORT            where the agent's UDP proxy listens (on the network's host side)
 *   B                              a new set begins (what came before `.` of an unfinished set is dropped)
 *   T IP PORT AFFINITY_SECONDS     one TCP Service port (AFFINITY_SECONDS 0: no sessionAffinity)
 *   E IP PORT                      a ready endpoint of the last T, in the agent's order
 *   U IP PORT                      one UDP Service port
 *   .                              the set is complete: it replaces the old one at once (listeners not in it
 *                                  are closed), and the gateway answers `ok`
 * TCP is balanced here, in one epoll loop with non-blocking sockets: each accepted connection gets an
 * endpoint as crate::proxy::balancer does (round robin over the endpoints; with affinity, the client IP's
 * last endpoint while it was used less than the timeout ago) and is connected straight to it (pods, and the
 * host for the `kubernetes` Service, are on the same network), then bytes are copied both ways with
 * half-close (EOF from one side: shutdown(SHUT_WR) of the other; closed when both directions are done).
 * A refused or failed backend, an error on either side, or a port without endpoints resets the client, as
 * kube-proxy's iptables rules do. A changed set keeps each port's round robin position and its affinity
 * entries to endpoints still present.
 * Each UDP datagram goes to the agent's UDP port with a 12-byte header (client IPv4, client port, Service
 * IPv4, Service port, network order); replies from the agent carry the same header and leave from the Service
 * address's socket. The set survives a lost control connection (a restarting agent), so Services keep
 * routing until the agent sends a new one.
 *
 * Built statically by node/build.rs and copied into a FROM-scratch image, like pause.
 *   usage: gateway SERVICE_CIDR CONTROL_IP CONTROL_PORT
 * SERVICE_CIDR `-` adds no route (tests on loopback addresses, without NET_ADMIN).
 */
#define _GNU_SOURCE
#include "route.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTENERS 4096
#define MAX_STAGED_ENDPOINTS 65536
#define MAX_AFFINITY 4096
#define CTL_BUF 65536
#define UDP_HEADER 12
#define RELAY_BUF 32768
#define EVENTS 256

enum kind { K_CONTROL_LISTEN, K_CONTROL, K_UDP_OUT, K_LISTENER, K_SIDE };

/* What an epoll event points at: every registered object starts with its kind. */
struct handler {
    enum kind kind;
};

struct affinity {
    uint32_t client;
    struct sockaddr_in endpoint;
    uint64_t used_ms;
};

struct listener {
    struct handler h;
    int fd;
    char proto; /* 'T' or 'U' */
    struct in_addr ip;
    uint16_t port; /* host order */
    int keep, dead;
    /* TCP: the balancer's state for this Service port. */
    struct sockaddr_in *endpoints;
    int n_endpoints;
    unsigned next;
    uint32_t affinity_s;
    struct affinity *clients;
    int n_clients;
};

struct conn;
struct side {
    struct handler h;
    struct conn *c;
    int d; /* 0: the client, 1: the backend */
};

struct conn {
    struct side s[2];
    int fd[2];
    uint32_t mask[2]; /* what epoll watches now; 0: not registered */
    char *buf[2];     /* buf[d]: read from side d, to be written to the other */
    size_t len[2], off[2];
    int eof[2];  /* side d sent EOF */
    int shut[2]; /* shutdown(SHUT_WR) done on side d */
    int connecting, dead;
    struct conn *next_dead;
};

/* One staged Service port of the set being received. */
struct staged {
    char proto;
    struct in_addr ip;
    uint16_t port;
    uint32_t affinity_s;
    int first, count; /* its endpoints in staged_endpoints */
};

static struct listener *listeners[MAX_LISTENERS];
static int n_listeners;
static struct listener *dead_listeners[MAX_LISTENERS];
static int n_dead_listeners;
static struct conn *dead_conns;
static struct staged staged[MAX_LISTENERS];
static int n_staged, staging;
static struct sockaddr_in staged_endpoints[MAX_STAGED_ENDPOINTS];
static int n_staged_endpoints;
static struct sockaddr_in agent_udp;
static int have_agent;
static int ep = -1, ctl_listen = -1, ctl_conn = -1, udp_out = -1;
static struct handler ctl_listen_h = {K_CONTROL_LISTEN}, ctl_h = {K_CONTROL}, udp_out_h = {K_UDP_OUT};
static char ctl_buf[CTL_BUF];
static size_t ctl_len;

static void on_term(int signo) {
    (void)signo;
    _exit(0);
}

static void log_line(const char *fmt, const char *a, unsigned b, const char *c) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b, c);
    ssize_t ignored = write(STDERR_FILENO, msg, strlen(msg));
    (void)ignored;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int watch(int fd, uint32_t events, void *ptr) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.ptr = ptr;
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static int open_listener(char proto, struct in_addr ip, uint16_t port) {
    int fd = socket(AF_INET, (proto == 'T' ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr = ip;
    a.sin_port = htons(port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || (proto == 'T' && listen(fd, 4096) < 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* ---- the balancer (the semantics of node/src/proxy/balancer.rs) ---- */

static int same_endpoint(const struct sockaddr_in *a, const struct sockaddr_in *b) {
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* Takes a new endpoint list and affinity: the round robin position stays, affinity entries to endpoints that
 * left are dropped, a changed affinity forgets every client. Returns -1 when out of memory (nothing changed). */
static int balancer_update(struct listener *l, const struct sockaddr_in *eps, int n, uint32_t affinity_s) {
    struct sockaddr_in *copy = NULL;
    if (n > 0) {
        copy = malloc(sizeof *copy * (size_t)n);
        if (copy == NULL)
            return -1;
        memcpy(copy, eps, sizeof *copy * (size_t)n);
    }
    free(l->endpoints);
    l->endpoints = copy;
    l->n_endpoints = n;
    if (l->affinity_s != affinity_s)
        l->n_clients = 0;
    l->affinity_s = affinity_s;
    int kept = 0;
    for (int i = 0; i < l->n_clients; i++) {
        for (int j = 0; j < n; j++) {
            if (same_endpoint(&l->clients[i].endpoint, &eps[j])) {
                l->clients[kept++] = l->clients[i];
                break;
            }
        }
    }
    l->n_clients = kept;
    return 0;
}

/* The endpoint for a new connection from `client` (network order); -1 when the port has none. */
static int balancer_next(struct listener *l, uint32_t client, uint64_t now, struct sockaddr_in *out) {
    if (l->n_endpoints == 0)
        return -1;
    uint64_t timeout = (uint64_t)l->affinity_s * 1000;
    int slot = -1;
    if (timeout > 0) {
        for (int i = 0; i < l->n_clients; i++) {
            if (l->clients[i].client != client)
                continue;
            if (now - l->clients[i].used_ms < timeout) {
                l->clients[i].used_ms = now;
                *out = l->clients[i].endpoint;
                return 0;
            }
            slot = i;
            break;
        }
    }
    *out = l->endpoints[l->next % (unsigned)l->n_endpoints];
    l->next = (l->next + 1) % (unsigned)l->n_endpoints;
    if (timeout == 0)
        return 0;
    if (slot < 0) {
        if (l->clients == NULL)
            l->clients = malloc(sizeof *l->clients * MAX_AFFINITY);
        if (l->clients == NULL)
            return 0;
        if (l->n_clients < MAX_AFFINITY) {
            slot = l->n_clients++;
        } else {
            /* Full: reuse an expired entry, else the least recently used one. */
            slot = 0;
            for (int i = 1; i < l->n_clients; i++)
                if (l->clients[i].used_ms < l->clients[slot].used_ms)
                    slot = i;
        }
    }
    l->clients[slot] = (struct affinity){client, *out, now};
    return 0;
}

/* ---- the control connection ---- */

static struct listener *find_listener(char proto, struct in_addr ip, uint16_t port) {
    for (int i = 0; i < n_listeners; i++) {
        struct listener *l = listeners[i];
        if (l->proto == proto && l->ip.s_addr == ip.s_addr && l->port == port)
            return l;
    }
    return NULL;
}

static struct listener *add_listener(char proto, struct in_addr ip, uint16_t port) {
    if (n_listeners == MAX_LISTENERS)
        return NULL;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &ip, text, sizeof text);
    int fd = open_listener(proto, ip, port);
    if (fd < 0) {
        log_line("gateway: cannot listen on %s:%u: %s\n", text, port, strerror(errno));
        return NULL;
    }
    struct listener *l = calloc(1, sizeof *l);
    if (l == NULL || watch(fd, EPOLLIN, l) < 0) {
        log_line("gateway: cannot watch %s:%u: %s\n", text, port, strerror(errno));
        free(l);
        close(fd);
        return NULL;
    }
    l->h.kind = K_LISTENER;
    l->fd = fd;
    l->proto = proto;
    l->ip = ip;
    l->port = port;
    listeners[n_listeners++] = l;
    return l;
}

/* `.`: the staged set replaces the current one. */
static void finish_set(void) {
    for (int i = 0; i < n_listeners; i++)
        listeners[i]->keep = 0;
    for (int i = 0; i < n_staged; i++) {
        struct staged *s = &staged[i];
        struct listener *l = find_listener(s->proto, s->ip, s->port);
        if (l == NULL)
            l = add_listener(s->proto, s->ip, s->port);
        if (l == NULL)
            continue;
        if (s->proto == 'T' && balancer_update(l, &staged_endpoints[s->first], s->count, s->affinity_s) < 0)
            continue; /* out of memory: the port keeps its old endpoints */
        l->keep = 1;
    }
    int kept = 0;
    for (int i = 0; i < n_listeners; i++) {
        struct listener *l = listeners[i];
        if (l->keep) {
            listeners[kept++] = l;
        } else {
            /* Freed after the current batch of events, which may still point at it. */
            close(l->fd);
            l->dead = 1;
            dead_listeners[n_dead_listeners++] = l;
        }
    }
    n_listeners = kept;
    n_staged = 0;
    n_staged_endpoints = 0;
    staging = 0;
}

static int parse_addr(const char *ip_text, const char *port_text, struct in_addr *ip, uint16_t *port) {
    char *end = NULL;
    long p = strtol(port_text, &end, 10);
    if (inet_pton(AF_INET, ip_text, ip) != 1 || *end != '\0' || p <= 0 || p > 65535)
        return -1;
    *port = (uint16_t)p;
    return 0;
}

static void control_line(char *line) {
    char *words[5] = {0};
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " ", &save); tok != NULL && n < 5; tok = strtok_r(NULL, " ", &save))
        words[n++] = tok;
    if (n == 0)
        return;
    struct in_addr ip;
    uint16_t port;
    if (strcmp(words[0], "A") == 0 && n == 3) {
        if (parse_addr(words[1], words[2], &ip, &port) < 0)
            return;
        memset(&agent_udp, 0, sizeof agent_udp);
        agent_udp.sin_family = AF_INET;
        agent_udp.sin_addr = ip;
        agent_udp.sin_port = htons(port);
        have_agent = 1;
    } else if (strcmp(words[0], "B") == 0) {
        staging = 1;
        n_staged = 0;
        n_staged_endpoints = 0;
    } else if (!staging) {
        return;
    } else if (strcmp(words[0], "T") == 0 && n == 4 && n_staged < MAX_LISTENERS) {
        char *end = NULL;
        long affinity = strtol(words[3], &end, 10);
        if (parse_addr(words[1], words[2], &ip, &port) < 0 || *end != '\0' || affinity < 0 || affinity > 86400)
            return;
        staged[n_staged++] = (struct staged){'T', ip, port, (uint32_t)affinity, n_staged_endpoints, 0};
    } else if (strcmp(words[0], "E") == 0 && n == 3 && n_staged > 0 && staged[n_staged - 1].proto == 'T' &&
               n_staged_endpoints < MAX_STAGED_ENDPOINTS) {
        if (parse_addr(words[1], words[2], &ip, &port) < 0)
            return;
        struct sockaddr_in *e = &staged_endpoints[n_staged_endpoints++];
        memset(e, 0, sizeof *e);
        e->sin_family = AF_INET;
        e->sin_addr = ip;
        e->sin_port = htons(port);
        staged[n_staged - 1].count++;
    } else if (strcmp(words[0], "U") == 0 && n == 3 && n_staged < MAX_LISTENERS) {
        if (parse_addr(words[1], words[2], &ip, &port) < 0)
            return;
        staged[n_staged++] = (struct staged){'U', ip, port, 0, 0, 0};
    } else if (strcmp(words[0], ".") == 0) {
        finish_set();
        ssize_t ignored = write(ctl_conn, "ok\n", 3);
        (void)ignored;
    }
}

static void drop_control(void) {
    close(ctl_conn);
    ctl_conn = -1;
    ctl_len = 0;
    staging = 0;
}

static void read_control(void) {
    ssize_t got = read(ctl_conn, ctl_buf + ctl_len, sizeof ctl_buf - ctl_len - 1);
    if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (got <= 0) {
        drop_control();
        return;
    }
    ctl_len += (size_t)got;
    char *start = ctl_buf;
    char *nl;
    while (ctl_conn >= 0 && (nl = memchr(start, '\n', ctl_len - (size_t)(start - ctl_buf))) != NULL) {
        *nl = '\0';
        control_line(start);
        start = nl + 1;
    }
    if (ctl_conn < 0)
        return;
    ctl_len -= (size_t)(start - ctl_buf);
    memmove(ctl_buf, start, ctl_len);
    if (ctl_len == sizeof ctl_buf - 1)
        ctl_len = 0; /* a line longer than the buffer: drop it */
}

static void accept_control(void) {
    int c = accept4(ctl_listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0)
        return;
    if (ctl_conn >= 0)
        drop_control(); /* closing it also takes it out of the epoll set */
    if (watch(c, EPOLLIN, &ctl_h) < 0) {
        close(c);
        return;
    }
    ctl_conn = c;
}

/* ---- TCP relays ---- */

/* Closes a socket with a reset (SO_LINGER 0) rather than a FIN. */
static void reset_close(int fd) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void conn_end(struct conn *c, int reset) {
    for (int d = 0; d < 2; d++) {
        if (c->fd[d] < 0)
            continue;
        if (reset)
            reset_close(c->fd[d]);
        else
            close(c->fd[d]); /* also takes it out of the epoll set */
        c->fd[d] = -1;
    }
    c->dead = 1;
    c->next_dead = dead_conns;
    dead_conns = c;
}

/* What side d needs to be watched for now. */
static uint32_t wanted(const struct conn *c, int d) {
    if (d == 1 && c->connecting)
        return EPOLLOUT;
    uint32_t m = 0;
    if (!c->eof[d] && c->len[d] == 0)
        m |= EPOLLIN;
    if (c->len[1 - d] > c->off[1 - d])
        m |= EPOLLOUT;
    return m;
}

/* Registers side d for what it needs; a side that needs nothing is taken out (epoll would report its
 * hang-up over and over). */
static int rewatch(struct conn *c, int d) {
    uint32_t m = wanted(c, d);
    if (m == c->mask[d])
        return 0;
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = m;
    e.data.ptr = &c->s[d];
    int op = m == 0 ? EPOLL_CTL_DEL : c->mask[d] == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(ep, op, c->fd[d], &e) < 0)
        return -1;
    c->mask[d] = m;
    return 0;
}

/* Writes what was read from side d to the other side; after its EOF, shuts the other side's writing. */
static int flush(struct conn *c, int d) {
    if (c->connecting)
        return 0;
    while (c->off[d] < c->len[d]) {
        ssize_t n = send(c->fd[1 - d], c->buf[d] + c->off[d], c->len[d] - c->off[d], MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return -1;
        }
        c->off[d] += (size_t)n;
    }
    c->len[d] = c->off[d] = 0;
    if (c->eof[d] && !c->shut[1 - d]) {
        shutdown(c->fd[1 - d], SHUT_WR);
        c->shut[1 - d] = 1;
    }
    return 0;
}

/* Reads from side d when its buffer is free. */
static int fill(struct conn *c, int d) {
    if (c->eof[d] || c->len[d] > 0)
        return 0;
    ssize_t n = recv(c->fd[d], c->buf[d], RELAY_BUF, 0);
    if (n > 0) {
        c->len[d] = (size_t)n;
        c->off[d] = 0;
    } else if (n == 0) {
        c->eof[d] = 1;
    } else if (errno != EAGAIN && errno != EINTR) {
        return -1;
    }
    return 0;
}

static void on_side(struct side *s, uint32_t events) {
    struct conn *c = s->c;
    int d = s->d;
    if (c->dead)
        return;
    if (d == 1 && c->connecting) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err != 0) {
            conn_end(c, 1); /* a refused or unreachable backend resets the client */
            return;
        }
        c->connecting = 0;
        if (flush(c, 0) < 0) {
            conn_end(c, 1);
            return;
        }
    }
    if (events & EPOLLERR) {
        conn_end(c, 1);
        return;
    }
    if ((events & (EPOLLIN | EPOLLHUP)) && (fill(c, d) < 0 || flush(c, d) < 0)) {
        conn_end(c, 1);
        return;
    }
    if ((events & EPOLLOUT) && flush(c, 1 - d) < 0) {
        conn_end(c, 1);
        return;
    }
    if (c->shut[0] && c->shut[1]) {
        conn_end(c, 0);
        return;
    }
    if (rewatch(c, 0) < 0 || rewatch(c, 1) < 0)
        conn_end(c, 1);
}

static void start_relay(struct listener *l, int client, const struct sockaddr_in *from) {
    struct sockaddr_in backend;
    if (balancer_next(l, from->sin_addr.s_addr, now_ms(), &backend) < 0) {
        reset_close(client);
        return;
    }
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct conn *c = calloc(1, sizeof *c);
    char *bufs = malloc(2 * RELAY_BUF);
    if (up < 0 || c == NULL || bufs == NULL) {
        if (up >= 0)
            close(up);
        free(c);
        free(bufs);
        reset_close(client);
        return;
    }
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int d = 0; d < 2; d++)
        c->s[d] = (struct side){{K_SIDE}, c, d};
    c->fd[0] = client;
    c->fd[1] = up;
    c->buf[0] = bufs;
    c->buf[1] = bufs + RELAY_BUF;
    int r = connect(up, (const struct sockaddr *)&backend, sizeof backend);
    if (r < 0 && errno != EINPROGRESS) {
        conn_end(c, 1);
        return;
    }
    c->connecting = r < 0;
    if (rewatch(c, 0) < 0 || rewatch(c, 1) < 0)
        conn_end(c, 1);
}

static void accept_tcp(struct listener *l) {
    for (int i = 0; i < 64; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int c = accept4(l->fd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
            return;
        start_relay(l, c, &from);
    }
}

/* ---- UDP, through the agent ---- */

static void udp_from_client(struct listener *l) {
    char buf[65536];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    for (int i = 0; i < 64; i++) {
        ssize_t n = recvfrom(l->fd, buf + UDP_HEADER, sizeof buf - UDP_HEADER, 0, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        if (!have_agent)
            continue;
        uint16_t vport = htons(l->port);
        memcpy(buf, &from.sin_addr, 4);
        memcpy(buf + 4, &from.sin_port, 2);
        memcpy(buf + 6, &l->ip, 4);
        memcpy(buf + 10, &vport, 2);
        sendto(udp_out, buf, (size_t)n + UDP_HEADER, 0, (struct sockaddr *)&agent_udp, sizeof agent_udp);
    }
}

static void udp_from_agent(void) {
    char buf[65536];
    for (int i = 0; i < 64; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(udp_out, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        if (n < UDP_HEADER || !have_agent || from.sin_addr.s_addr != agent_udp.sin_addr.s_addr)
            continue;
        struct sockaddr_in client;
        memset(&client, 0, sizeof client);
        client.sin_family = AF_INET;
        memcpy(&client.sin_addr, buf, 4);
        memcpy(&client.sin_port, buf + 4, 2);
        struct in_addr vip;
        uint16_t vport;
        memcpy(&vip, buf + 6, 4);
        memcpy(&vport, buf + 10, 2);
        struct listener *l = find_listener('U', vip, ntohs(vport));
        if (l != NULL)
            sendto(l->fd, buf + UDP_HEADER, (size_t)n - UDP_HEADER, 0, (struct sockaddr *)&client, sizeof client);
    }
}

static void free_dead(void) {
    while (dead_conns != NULL) {
        struct conn *c = dead_conns;
        dead_conns = c->next_dead;
        free(c->buf[0]);
        free(c);
    }
    for (int i = 0; i < n_dead_listeners; i++) {
        free(dead_listeners[i]->endpoints);
        free(dead_listeners[i]->clients);
        free(dead_listeners[i]);
    }
    n_dead_listeners = 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: gateway SERVICE_CIDR CONTROL_IP CONTROL_PORT\n");
        return 2;
    }
    struct in_addr range, ctl_ip;
    int prefix = 0;
    int route = strcmp(argv[1], "-") != 0;
    if ((route && parse_cidr(argv[1], &range, &prefix) < 0) || inet_pton(AF_INET, argv[2], &ctl_ip) != 1) {
        fprintf(stderr, "gateway: bad arguments\n");
        return 2;
    }
    if (route) {
        int err = add_route(range, prefix, NULL);
        if (err < 0) {
            fprintf(stderr, "gateway: cannot add the local route %s: %s\n", argv[1], strerror(-err));
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);

    ep = epoll_create1(EPOLL_CLOEXEC);
    ctl_listen = open_listener('T', ctl_ip, (uint16_t)strtol(argv[3], NULL, 10));
    udp_out = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ep < 0 || ctl_listen < 0 || udp_out < 0 || watch(ctl_listen, EPOLLIN, &ctl_listen_h) < 0 ||
        watch(udp_out, EPOLLIN, &udp_out_h) < 0) {
        fprintf(stderr, "gateway: cannot open the control port %s:%s: %s\n", argv[2], argv[3], strerror(errno));
        return 1;
    }
    fprintf(stderr, "gateway: owning %s, control on %s:%s\n", argv[1], argv[2], argv[3]);

    static struct epoll_event events[EVENTS];
    for (;;) {
        int n = epoll_wait(ep, events, EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct handler *h = events[i].data.ptr;
            switch (h->kind) {
            case K_CONTROL_LISTEN:
                accept_control();
                break;
            case K_CONTROL:
                if (ctl_conn >= 0)
                    read_control();
                break;
            case K_UDP_OUT:
                udp_from_agent();
                break;
            case K_LISTENER: {
                struct listener *l = (struct listener *)h;
                if (l->dead)
                    break;
                if (l->proto == 'T')
                    accept_tcp(l);
                else
                    udp_from_client(l);
                break;
            }
            case K_SIDE:
                on_side((struct side *)h, events[i].events);
                break;
            }
        }
        free_dead();
    }
}
