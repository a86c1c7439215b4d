// Command show prints how many entries the catalog linked into it holds and
// whether it is a release's; catalog_test builds it with and without -X.
package main

import (
	"fmt"
	"os"

	"github.com/arkadiuss/openfief/internal/trust/catalog"
)

func main() {
	c, err := catalog.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, e := range c.Entries() {
		fmt.Printf("%s %s\n", e.Name, e.Image.Digest())
	}
	fmt.Printf("entries=%d released=%t\n", c.Len(), catalog.Released())
}
