package node

import (
	"context"
	"fmt"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arkadiuss/openfief/internal/devcluster/proc"
)

// Component names a process of the real node that KillComponent can kill
// and start again.
type Component string

// The node's components a fault test may kill.
const (
	Containerd Component = containerdBin
	Kubelet    Component = kubeletBin
)

// KillComponent ends the real node's process comp with SIGKILL, as a
// crash would (only that process: containerd's shims, and so the
// containers, keep running, as they do when containerd dies on a real
// node), keeps it down for down, and starts it again with the same
// configuration, returning once it serves again: containerd's socket
// answers, or the kubelet has the node Ready. It is meant for fault tests
// and must not run concurrently with Stop.
func (n *Node) KillComponent(ctx context.Context, comp Component, down time.Duration) error {
	i := -1
	for j, p := range n.procs {
		if p.Name == string(comp) {
			i = j
		}
	}
	if i < 0 || (comp != Containerd && comp != Kubelet) {
		return fmt.Errorf("devcluster: the node has no component %q to kill", comp)
	}
	old := n.procs[i]
	_ = syscall.Kill(old.Pid(), syscall.SIGKILL)
	select {
	case <-old.Done():
	case <-time.After(30 * time.Second):
		return fmt.Errorf("devcluster: %s outlived SIGKILL for 30 s", comp)
	}
	select {
	case <-ctx.Done():
		// Start it anyway: a node left without it helps nobody.
	case <-time.After(down):
	}
	p, err := proc.Start(old.Name, old.Cmd.Path, old.Cmd.Args[1:], old.Cmd.Env, n.opts.LogDir, n.opts.Output)
	if err != nil {
		return err
	}
	n.procs[i] = p
	if err := n.opts.Watch(p.Pid()); err != nil {
		return fmt.Errorf("devcluster: watchdog: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch comp {
	case Containerd:
		return n.waitFor(ctx, "containerd to serve again", func(context.Context) (bool, error) {
			if err := p.Exited(); err != nil {
				return false, err
			}
			return n.containerdServes(), nil
		})
	default:
		cs := n.cp.Clientset
		// The node stays Ready through a short outage (the lease is 40 s
		// old before it is not): wait for a heartbeat of the new kubelet.
		started := time.Now()
		return n.waitFor(ctx, "the restarted kubelet to renew the node's lease", func(ctx context.Context) (bool, error) {
			if err := p.Exited(); err != nil {
				return false, err
			}
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, Name, metav1.GetOptions{})
			if err != nil || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(started) {
				return false, nil
			}
			return n.cp.Ready(ctx, Name)
		})
	}
}
