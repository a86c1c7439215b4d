// Package sandbox runs a plugin image's root file system as a hostile
// process, without a cluster or a container runtime, and records
// everything it tries to reach: the ground the conformance harness
// (openfief plugin test) stands on.
//
// Unpack flattens the image with go-containerregistry's mutate.Extract and
// writes it under a folder with openat2(RESOLVE_IN_ROOT): no entry, link or
// hard link can write outside it; device nodes are not created and
// setuid/setgid bits are dropped; file content and entries are bounded
// (ErrTooBig).
//
// Start runs the program as PID 1 of new PID, mount, UTS, IPC and network
// namespaces, as a pod's container would run: pivot_root into the folder,
// "/" read-only (the operator sets readOnlyRootFilesystem), /tmp an
// in-memory tmpfs of Limits.TmpBytes (the operator's emptyDir), /dev a
// tmpfs with the usual character devices, /proc with /proc/sys read-only
// and the files about the host masked, /etc/resolv.conf and /etc/hosts
// written as a kubelet does, the hostname set. The process runs as
// Spec.UID:GID with no supplementary group, no capability in any set
// (bounding and ambient included, so even uid 0 gets none at exec) and
// no_new_privs. The harness's own binary is executed again as that PID 1
// (the package's init function recognises it by its argv[0]), sets this up,
// and executes the plugin in its place; Start returns the reason if any
// step failed. Being PID 1, the plugin sees SIGTERM only through a handler
// of its own, as in a container.
//
// The network namespace has loopback and one TUN link holding the default
// routes of IPv4 and IPv6: every packet bound elsewhere is read by the
// harness, recorded as an Attempt and never answered (a TCP connection
// hangs until the plugin gives up; retransmissions count once). DNS over
// UDP port 53 is decoded there too, and UDP and TCP port 53 of 127.0.0.1,
// 127.0.0.53 and ::1 are served by listeners that record each question and
// answer REFUSED. Listen and DialContext open sockets in that namespace
// (on a thread that joins it and ends after), where the harness puts the
// egress proxy and the stand-in core and reaches the plugin's port.
//
// The sandbox's cgroup holds the limits and measures Usage: on cgroup v2 a
// child of the hierarchy's root with memory.max, cpu.max and pids.max
// (memory.peak needs Linux 5.19); on a machine whose memory, cpu, cpuacct
// and pids controllers are on cgroup v1 (systemd's "hybrid" layout), a
// child of the harness's own cgroup in each of those hierarchies. When
// neither can be made, Start fails with ErrNoCgroup rather than run a
// hostile process without bounds.
//
// Where it runs: Linux only (ErrUnsupported elsewhere), kernel 5.6 or
// later (openat2), as root (ErrNeedsRoot otherwise): namespaces, mounts,
// the TUN link, port 53 and cgroups need it. Unprivileged user namespaces
// are not supported: the TUN link, cgroup limits and the uid switch would
// each need a delegation that a vendor's machine seldom has. Close kills
// the process (and so its PID namespace), closes the TUN link, the
// listeners and the namespace, and removes the cgroup; the mounts were
// only ever in the process's own mount namespace. The unpacked folder is
// the caller's to remove.
//
// What the sandbox does not see or reproduce: no seccomp filter is applied
// (a cluster applies RuntimeDefault), so a syscall that profile refuses is
// allowed here; /sys is not mounted, so a plugin that sizes itself from
// /sys/fs/cgroup finds nothing there; traffic between processes of the
// plugin on its own loopback is not recorded (only what leaves loopback,
// and DNS on it); a plugin that only connects after a delay longer than the
// harness runs it is not caught; and what the kernel's own IPv6
// housekeeping sends (neighbour discovery, router solicitations, MLD) is
// left out of Attempts.
package sandbox
