package cli

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/arkadiuss/openfief/deploy"
	"github.com/arkadiuss/openfief/internal/platform"
	"github.com/arkadiuss/openfief/internal/plugins"
)

// TestCheckCoreSchema: platform upgrade refuses an overlay whose core knows
// fewer schema versions than the installed core, with or without
// --allow-downgrade; allows one that knows as many or more; and, when
// either side does not say (a release made before the annotation), goes on,
// saying on a downgrade that it could not check.
func TestCheckCoreSchema(t *testing.T) {
	core := func(schema int) []*unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace(plugins.Namespace)
		u.SetName(deploy.CoreDeployment)
		if schema > 0 {
			u.SetAnnotations(map[string]string{deploy.CoreSchemaAnnotation: strconv.Itoa(schema)})
		}
		return []*unstructured.Unstructured{u}
	}
	for name, tc := range map[string]struct {
		installed, next int // 0: no annotation
		allowDowngrade  bool
		refused         bool
		warns           bool
	}{
		"same schema":                           {3, 3, false, false, false},
		"newer schema":                          {3, 4, false, false, false},
		"fewer schemas":                         {3, 2, false, true, false},
		"fewer schemas, downgrade allowed":      {3, 2, true, true, false},
		"same schema, downgrade allowed":        {3, 3, true, false, false},
		"to a release without it, downgrade":    {3, 0, true, false, true},
		"from a release without it":             {0, 3, false, false, false},
		"neither says, downgrade allowed":       {0, 0, true, false, true},
		"to a release without it, no downgrade": {3, 0, false, false, false},
	} {
		var errOut bytes.Buffer
		o := &platformApplyOptions{env: NewEnv(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut}), upgrade: true, allowDowngrade: tc.allowDowngrade}
		err := o.checkCoreSchema(core(tc.installed), &platform.Set{Version: "v0.1.0", Objects: core(tc.next)})
		var ee *ExitError
		switch {
		case tc.refused && (!errors.As(err, &ee) || ee.Code != ExitInvalid || !strings.Contains(err.Error(), "it would refuse the record")):
			t.Errorf("%s: %v, want refused with exit %d", name, err, ExitInvalid)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v, want allowed", name, err)
		}
		if got := strings.Contains(errOut.String(), "cannot tell whether the core of v0.1.0 knows"); got != tc.warns {
			t.Errorf("%s: warned %v (%q), want %v", name, got, errOut.String(), tc.warns)
		}
	}
}
