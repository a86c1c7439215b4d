package platform

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// WriteYAML writes every object of s as YAML documents in apply order, each
// with its keys sorted: the same overlay and addresses give the same bytes.
func (s *Set) WriteYAML(w io.Writer) error {
	for _, u := range s.Objects {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", describe(u), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}
