package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeComponent names a process of the real node that KillNodeComponent
// can kill and start again.
type NodeComponent string

// The node's components a fault test may kill.
const (
	NodeContainerd NodeComponent = containerdBin
	NodeKubelet    NodeComponent = kubeletBin
)

// KillNodeComponent ends the real node's process comp with SIGKILL, as a
// crash would (only that process: containerd's shims, and so the
// containers, keep running, as they do when containerd dies on a real
// node), keeps it down for down, and starts it again with the same
// configuration, returning once it serves again: containerd's socket
// answers, or the kubelet has the node Ready. It is meant for fault tests
// and must not run concurrently with Stop.
func (c *Cluster) KillNodeComponent(ctx context.Context, comp NodeComponent, down time.Duration) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if c.node == nil {
		return errors.New("devcluster: KillNodeComponent needs a real node")
	}
	n := c.node
	i := -1
	for j, p := range n.procs {
		if p.name == string(comp) {
			i = j
		}
	}
	if i < 0 || (comp != NodeContainerd && comp != NodeKubelet) {
		return fmt.Errorf("devcluster: the node has no component %q to kill", comp)
	}
	old := n.procs[i]
	_ = syscall.Kill(old.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-old.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("devcluster: %s outlived SIGKILL for 30 s", comp)
	}
	select {
	case <-ctx.Done():
		// Start it anyway: a node left without it helps nobody.
	case <-time.After(down):
	}
	p, err := startProcessEnv(old.name, old.cmd.Path, old.cmd.Args[1:], old.cmd.Env, filepath.Join(c.Dir, "logs"), n.output)
	if err != nil {
		return err
	}
	n.procs[i] = p
	if err := c.reaper.watch(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("devcluster: watchdog: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch comp {
	case NodeContainerd:
		return c.waitFor(ctx, "containerd to serve again", func(context.Context) (bool, error) {
			if err := p.exited(); err != nil {
				return false, err
			}
			conn, err := net.Dial("unix", n.layout.containerdSocket)
			if err != nil {
				return false, nil
			}
			_ = conn.Close()
			return true, nil
		})
	default:
		cs, err := c.Clientset()
		if err != nil {
			return err
		}
		// The node stays Ready through a short outage (the lease is 40 s
		// old before it is not): wait for a heartbeat of the new kubelet.
		started := time.Now()
		return c.waitFor(ctx, "the restarted kubelet to renew the node's lease", func(ctx context.Context) (bool, error) {
			if err := p.exited(); err != nil {
				return false, err
			}
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, RealNodeName, metav1.GetOptions{})
			if err != nil || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(started) {
				return false, nil
			}
			return fullReady(ctx, cs, []string{RealNodeName})
		})
	}
}
