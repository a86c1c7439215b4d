package devstack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/arkadiuss/openfief/internal/plugins"
)

// The owner's trusted signers in every mode of the stack live where an
// install keeps them: the ConfigMap openfief-trusted-signers (D-45), which
// the operator follows live (OF-31), in this process as in a pod. The
// stack creates it with the local owner key and then only mirrors it into
// Stack.SignersFile, for `openfief plugin verify --signers`, which reads no
// cluster: the CLI's install and upgrade read the ConfigMap itself. Editing
// the file changes nothing; editing the ConfigMap changes both.

// ownerSignersName is the local owner key's name in the ConfigMap.
const ownerSignersName = "local-owner"

// publishSigners creates the ConfigMap openfief-trusted-signers in the
// openfief namespace holding signers (a signers.json trusting the local
// owner key), as `openfief platform install` leaves it for the owner, and
// writes the same bytes to Stack.SignersFile in dir.
func (s *Stack) publishSigners(ctx context.Context, client kubernetes.Interface, dir string, signers []byte) error {
	s.SignersFile = filepath.Join(dir, "signers.json")
	if err := writeFileAtomic(s.SignersFile, signers); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.OwnerSignersConfigMap, Namespace: plugins.Namespace},
		Data:       map[string]string{plugins.OwnerSignersKey: string(signers)},
	}
	_, err := client.CoreV1().ConfigMaps(plugins.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// mirrorSigners follows the ConfigMap openfief-trusted-signers until the
// stack stops and writes its signers.json to Stack.SignersFile on every
// change, byte for byte, so `plugin verify --signers "$OPENFIEF_SIGNERS"`
// judges an image as the operator does: an invalid content stays invalid,
// and no ConfigMap (or no key in it) leaves an empty file, which trusts no
// owner signer, as the operator then trusts none.
func (s *Stack) mirrorSigners(client kubernetes.Interface, log *slog.Logger) {
	selector := fields.OneTermEqualSelector("metadata.name", plugins.OwnerSignersConfigMap).String()
	cms := client.CoreV1().ConfigMaps(plugins.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return cms.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return cms.Watch(ctx, opts)
		},
	}
	write := func(obj any) {
		var raw []byte
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			raw = []byte(cm.Data[plugins.OwnerSignersKey])
		}
		if err := writeFileAtomic(s.SignersFile, raw); err != nil {
			log.Warn("the trusted signers' copy not written", "file", s.SignersFile, "error", err.Error())
		}
	}
	_, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, client),
		ObjectType:    &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    write,
			UpdateFunc: func(_, obj any) { write(obj) },
			DeleteFunc: func(any) { write(nil) },
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		controller.RunWithContext(ctx)
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
}

// writeFileAtomic replaces file with data (0600) in one rename, so a reader
// never sees half of it.
func writeFileAtomic(file string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-"+filepath.Base(file)+"-")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}
