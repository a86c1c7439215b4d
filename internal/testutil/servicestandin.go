package testutil

import (
	"context"
	"net"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// HostAddress is an IPv4 address of this machine that is not loopback: the
// API server's service proxy refuses endpoints on loopback, so a server a
// test puts behind a Service listens there.
func HostAddress(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address other than loopback; a Service backed by a test's server needs one")
	return ""
}

// ServeServiceAt creates the Service ns/service with one port named
// portName whose only endpoint is ip:port, a server of the test's, and
// removes it all when the test ends. The API server's service proxy reads a
// Service's EndpointSlices and proxies only to an endpoint whose target is a
// pod holding that address, so a stand-in pod, never scheduled, holds it in
// its status (written here). The namespace needs the ServiceAccount
// serviceAccount, which the pod names (the minimal control plane makes no
// default one).
func ServeServiceAt(t testing.TB, cs kubernetes.Interface, ns, service, portName, serviceAccount, ip, port string) {
	t.Helper()
	ctx := context.Background()
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-stand-in"},
		Spec: corev1.PodSpec{
			NodeName: "nowhere", ServiceAccountName: serviceAccount, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "server", Image: "unpinned.invalid/stand-in"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: portName, Port: int32(p), TargetPort: intstr.FromInt(p), Protocol: corev1.ProtocolTCP},
		}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{}) })
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-stand-in", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})
}
