#include "help.hpp"

namespace redsync::cli {

const std::string_view main_help = R"(Usage: redsync COMMAND [OPTIONS]

A distributed flock(1): run a command while holding a Redlock lock on N
independent Redis masters.

Commands:
  lock [OPTIONS] NAME -- COMMAND [ARGS...]
  lock [OPTIONS] NAME -c STRING
                 acquire NAME, run COMMAND (or STRING with /bin/sh -c)
                 while holding it, release it
  lock [OPTIONS] NAME
                 acquire NAME, print its value and token, hold it until
                 a signal (SIGINT, SIGTERM, ...), release it
  lock -s [OPTIONS] NAME ...
                 the same with a shared hold of NAME (flock -s): any
                 number of shared holders at once, none beside an
                 exclusive one (the default)
  lock -n K [OPTIONS] NAME ...
                 the same with one of K permits of the semaphore NAME
                 (at most K holders at once) instead of the lock NAME
  status [OPTIONS] NAME
                 show what every node holds for NAME, who holds it
                 (readers: each one), and which nodes do not vote yet
                 (a semaphore: its permits)
  ping [OPTIONS] PING every node, with round-trip times and whether its
                 vote counts yet
  help [COMMAND] this help, or a command's (also: redsync COMMAND --help)
  --version      print the version

Nodes (all commands):
  --nodes URI[,URI...]   redis://[user[:password]@]host[:port][/db],
                         rediss://...[?PARAM=VALUE&...] (TLS) or
                         unix:///path/redis.sock[?db=N]. Default: $REDSYNC_NODES,
                         else the testbed's: redis://127.0.0.1:PORT for the
                         $REDSYNC_TESTBED_NODES (5) ports from
                         $REDSYNC_TESTBED_PORT (7001) on

TLS (all commands; for every rediss:// node whose URI does not set the
parameter named in brackets itself):
  --tls-ca FILE          PEM CA certificates to verify the server with (ca);
                         default: the system's trust store
  --tls-ca-dir DIR       a directory of PEM CA certificates: every regular
                         file in it is read, no hashed names needed (ca_dir)
  --tls-cert FILE        client certificate for mutual TLS (cert); needs
                         --tls-key
  --tls-key FILE         the client certificate's private key (key)
  --tls-server-name NAME the name to verify the certificate against and to
                         send as SNI (server_name); default: the URI's host
  --tls-insecure         DANGEROUS, for test setups only: do not verify the
                         server's certificate at all (insecure=true); anyone
                         on the path can pose as the node

Durations: 0, a number of seconds (5, 1.5), or a number with a unit:
250ms, 8s, 2m, 10h; at most 7 days.

Exit statuses:
  0..255  lock: the command's own status (128+N if signal N killed it)
  0       lock without a command: released after a signal; status: a
          quorum of nodes answered; ping: all nodes up
  1       ping: some nodes down, a quorum up
  64      usage or configuration error (lock -n: also nodes that store
          another number of permits for NAME; -s with -n)
  69      lock: too few nodes reachable or voting for a quorum (down,
          timing out, or not voting yet: restart guard, unverified);
          status/ping: fewer than a quorum of nodes answered
  70      internal error
  75      lock: held by another holder (a writer, or readers: -s), or
          every permit held (not acquired within --wait/--tries)
  76      lock: nodes answer every attempt with an error retrying cannot
          fix (WRONGTYPE, READONLY, ...), too many for a quorum
  77      authentication or permission refused (NOAUTH, WRONGPASS, NOPERM),
          or TLS that no retry can fix (certificate verification failed,
          a client certificate demanded, redis:// to a TLS port), by too
          many nodes for a quorum
  79      lock: the lock was lost while the command ran (or while held)
  126     lock: the command cannot be executed
  127     lock: the command was not found
  128+N   lock: interrupted by signal N while acquiring
)";

const std::string_view lock_help = R"(Usage: redsync lock [OPTIONS] NAME -- COMMAND [ARGS...]
       redsync lock [OPTIONS] NAME -c STRING
       redsync lock [OPTIONS] NAME
       redsync lock -s [OPTIONS] NAME ...
       redsync lock -n K [OPTIONS] NAME ...

Acquire the lock NAME, run COMMAND while holding it (the lock is extended
automatically while COMMAND runs), release it when COMMAND exits, and exit
with COMMAND's status (128+N if signal N killed it). With -c, COMMAND is
/bin/sh -c STRING, as with flock -c.

Without a command (hold mode), print REDSYNC_LOCK_NAME=...,
REDSYNC_LOCK_VALUE=... and REDSYNC_FENCING_TOKEN=... on stdout, one per
line (quoted for the shell where needed), hold the lock (extended
automatically) until SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 or
SIGALRM, release it and exit 0 (79 if it was lost meanwhile).

COMMAND gets these environment variables:
  REDSYNC_LOCK_NAME      the lock name
  REDSYNC_LOCK_VALUE     this holder's value: who asked for the lock, from
                         where and when, and random bytes (see redsync status)
  REDSYNC_FENCING_TOKEN  the fencing token of this acquisition
  REDSYNC_NODES          the node URIs, comma-separated

With -s (--shared), redsync takes a shared hold of NAME, as flock -s does:
any number of shared holders at once, but none while an exclusive holder
(redsync lock NAME without -s, the default) holds it; an exclusive holder
waits until the last shared one lets go. Shared and exclusive holders wait
in one line, served in arrival order, consecutive shared ones together:
a shared holder that arrives behind a waiting exclusive one waits too, so
neither starves. Everything else is that of a lock (extension, loss,
signals, hold mode, the environment, exit statuses), except that
REDSYNC_LOCK_VALUE starts with the byte 0x01, as every reader's value does.
When the wait runs out (exit 75), and in the waiting reports, redsync says
what stands in the way: "NAME" is held by readers (to an exclusive run),
"NAME" is held by a writer, or a writer waits ahead in the line.

With -n K (--permits K), redsync acquires one of K permits of the counting
semaphore NAME instead of the lock NAME: at most K holders at once, across
the nodes (the semaphore's quorum is floor(K*N/(K+1))+1 of the N nodes, not
a majority). Everything else is the same (extension, loss, signals, hold
mode), except: there is no waiting line (a waiter may be overtaken) and no
check attempts while waiting; --fail-fast is refused; every holder of NAME
must give the same K (nodes that store another K refuse, exit 64); NAME is
never a lock and a semaphore at once: each waits while the other holds it
(exit 75 when the wait runs out, saying "NAME" is held as a mutex, or as a
semaphore). Instead of REDSYNC_LOCK_VALUE, COMMAND gets (and hold mode
prints)
  REDSYNC_PERMITS        K
  REDSYNC_PERMIT_ID      the permit's id (random)
  REDSYNC_SLOT           the permit's slot, 0..K-1: at most one live permit
                         has a slot at a time
  REDSYNC_FENCING_TOKEN  the permit's token; tokens grow per slot, so a
                         resource that fences keeps the highest token per
                         slot

Options:
  --nodes URI[,URI...]   the Redis masters (see redsync --help)
  --tls-ca FILE, --tls-ca-dir DIR, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --tls-insecure
                         TLS for rediss:// nodes (see redsync --help)
  -s, --shared           a shared hold of NAME (see above); default:
                         exclusive. Not with -n
  -n, --permits K        a permit of the semaphore NAME of K permits, K in
                         1..1024, instead of the lock NAME (see above)
  --ttl DURATION         lock expiry on each node; default 8s
  --wait DURATION        give up acquiring after DURATION; 0 = exactly one
                         try; default: keep trying forever
  --tries N              at most N acquisition attempts; default unlimited
  --retry-delay DURATION fixed delay between attempts; default random in
                         [50ms, 250ms)
  --drift-factor F       clock drift allowance, a fraction of --ttl in [0, 1);
                         default 0.01
  --fail-fast            decide each attempt as soon as the outcome is
                         certain, without waiting for every node
  --no-restart-guard     count the votes of nodes that started less than
                         --ttl ago (only for throw-away test nodes; also
                         REDSYNC_RESTART_GUARD=0)
  --kill-grace DURATION  SIGKILL the command's group this long after
                         SIGTERM (lost lock, leftovers), but never past the
                         lock's validity; default 5s
  --report-every DURATION
                         while waiting, say why on stderr after
                         min(2s, DURATION) and then every DURATION;
                         0 = never; default 10s
  --script-mode MODE     how the lock scripts run on the nodes: eval
                         (EVALSHA, then EVAL) or functions (FCALL of Redis
                         Functions, Redis >= 7: for a user whose ACL denies
                         EVAL and EVALSHA); default $REDSYNC_SCRIPT_MODE,
                         else eval
  -c, --command STRING   run STRING with /bin/sh -c instead of COMMAND
  -q, --quiet            do not report waiting, or a failure to acquire or
                         to release (lost locks and errors are always
                         reported)
  -v, --verbose          report each node's outcome of acquire and release,
                         and forwarded signals; -vv also each node's
                         detail in the waiting reports. -q and -v count
                         against each other: -qv is the default
  -h, --help             this help

While it waits, redsync checks once a second why (one extra attempt, which
takes the lock if it is free and no one is ahead in line). It gives up at
once, whatever --wait says, when two checks in a row find more nodes than
a quorum can spare refusing the credentials or permissions (exit 77) or
answering with errors retrying cannot fix (exit 76).

COMMAND runs in a process group of its own. If the lock is lost while it
runs, the group gets SIGTERM (then SIGKILL after --kill-grace, or just
before the lock's validity ends if that is sooner) and redsync exits with
79. The group's supervisor process does so on its own when no extension
reaches it in time, so even a stopped redsync cannot leave COMMAND running
without the lock. Processes COMMAND leaves behind in its group get the same
when it exits, before the lock is released; if redsync itself dies, even by
SIGKILL, the group gets the same (Linux PR_SET_PDEATHSIG).

SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH and
SIGCONT sent to redsync are forwarded to COMMAND's group; SIGPIPE, SIGTSTP,
SIGTTIN and SIGTTOU are ignored. If COMMAND ignores a forwarded signal (as a
command started in the background by a non-interactive shell ignores SIGINT
and SIGQUIT), redsync says so: COMMAND keeps running and the lock stays
held. While acquiring, any forwarded one except SIGWINCH and SIGCONT makes
redsync give up and exit with 128+N. From an interactive shell, COMMAND's
group gets the terminal (foreground) while it runs; Ctrl-Z is not
supported (a stopped COMMAND is resumed).

Exit statuses: COMMAND's status (hold mode: 0 once released); 64 usage
error (-n: nodes store another K; -s with -n); 69 too few nodes reachable
or voting; 70 internal error; 75 held by another holder (-s: by a writer;
without -s: also by readers), or every permit held (not acquired within
--wait / --tries); 76 nodes answer errors retrying cannot fix; 77
authentication or permission refused; 79 lock lost while running or held;
126 COMMAND not executable; 127 COMMAND not found; 128+N interrupted by
signal N while acquiring.
)";

const std::string_view status_help = R"(Usage: redsync status [OPTIONS] NAME

For every node: whether the key NAME exists, its remaining time to live and
its value, whether it is ours (equal to --value, or to $REDSYNC_LOCK_VALUE,
which redsync lock sets for its command), and whether the node's vote
counts yet (see redsync ping --help); a key that a release kept for the
head of the waiting line is shown as such, not as held. Then who holds it:
for a value redsync lock made, the user, host and pid of that run and since
when it asked for the lock (it may have waited before it got it); "an
unknown holder" for other values. A node where shared holders (redsync lock
-s) hold NAME shows "held by N live readers" (from NAME:redsync-readers),
and each reader is listed as a holder is ("held by reader ..."). Then the
waiting line, oldest first: who waits (a shared waiter as "reader"), since
when, on how many nodes, and how much of its lease is left.
Then each node's fencing counter (the next holder's token is above the
counters of the nodes it wins). Then a summary.

A cluster member (redis+cluster://...) is read on the master that serves
NAME's slot, in the cluster key layout ({NAME}, the slot's node record, a
semaphore's redsync:sem:{NAME}), following one MOVED or ASK; its line names
that master.

For a semaphore (redsync lock -n K NAME), when a node holds a permit of
NAME and none holds the lock NAME, or with -n: for every node, the K its
holders agreed on and each live permit (slot, id, time to live); then each
permit and on how many nodes it is; then a summary with the semaphore's
quorum.

Options:
  --nodes URI[,URI...]   the Redis masters (see redsync --help)
  --tls-ca FILE, --tls-ca-dir DIR, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --tls-insecure
                         TLS for rediss:// nodes (see redsync --help)
  --value VALUE          the value that counts as ours
  --timeout DURATION     per-node connect and reply timeout; default 1s
  --ttl DURATION         judge votes as redsync lock --ttl DURATION would
                         (its restart-guard window); default 8s
  -n, --permits K        show NAME as a semaphore of K permits (its quorum,
                         and whether the nodes store another K)
  --json                 print one JSON object instead
  -h, --help             this help

Exit statuses: 0 a quorum of nodes answered; 64 usage error; 69 fewer than a
quorum answered; 77 authentication refused, or TLS that no retry can fix
(certificate verification, redis:// to a TLS port), by too many nodes for a
quorum.
)";

const std::string_view ping_help = R"(Usage: redsync ping [OPTIONS]

PING every node; print each node's round-trip time in microseconds, or why
it is down, and whether its vote counts yet; then how many are up and how
many vote. A node that answers but refuses the credentials (WRONGPASS,
NOAUTH) is "up, auth refused": reachable, but unusable until the URI is
fixed.

A node that is up may not vote yet: with no redsync record of its current
server run (brand-new, restarted, replaced or flushed) it votes once a
client has repaired the record: at the first lock's look when no node of
the set has a counter yet (a brand-new set, or a cluster slot no lock has
used), else about one guard window after a client first meets it, and then
the restart guard keeps it out until the guard window
(the longest --ttl used on it, or --ttl below if longer) has passed since it
was first seen so: ping says for how long. A node that cannot be identified
(INFO refused), is a replica or may evict keys never votes. So does, until
the node list is fixed, one server under two names, a Redis Cluster node
given as redis:// (give it as redis+cluster://), and one cluster given as
two redis+cluster:// members; ping then exits 64.

A cluster member (redis+cluster://...) is up when every slot has a master
that answers PING; ping lists its masters with their round trips and slots,
and says which slots have no master. Its vote is judged per slot (see
redsync status). Quorum and exit status count members, not masters.

Options:
  --nodes URI[,URI...]   the Redis masters (see redsync --help)
  --tls-ca FILE, --tls-ca-dir DIR, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, --tls-insecure
                         TLS for rediss:// nodes (see redsync --help)
  --timeout DURATION     per-node connect and reply timeout; default 1s
  --ttl DURATION         judge votes as redsync lock --ttl DURATION would
                         (its restart-guard window); default 8s
  --json                 print one JSON object instead
  -h, --help             this help

Exit statuses (about reachability; the votes are shown): 0 all nodes up;
1 some down or refusing but a quorum up; 64 usage error, or the node list
needs fixing (see above); 69 fewer than a quorum up; 77 authentication
refused, or TLS that no retry can fix (certificate verification, redis://
to a TLS port), by too many nodes for a quorum.
)";

}  // namespace redsync::cli
