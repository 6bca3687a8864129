package extauth_test

import (
	"context"
	"fmt"
	"time"

	"github.com/extauth/extauth"
)

// One instance keeps its single-use values in memory, at most MaxEntries at
// once; past the bound a new sign-in is refused (provider_unavailable)
// until values expire, and no value is forgotten early.
func ExampleNewMemoryStore() {
	store := extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: 2})
	// extauth.New(cfg, extauth.Options{Store: store, ...}) would use it.
	ctx := context.Background()
	until := time.Now().Add(10 * time.Minute)
	for _, key := range []string{"tx:a", "tx:b", "tx:a", "tx:c"} {
		fresh, err := store.Consume(ctx, key, until)
		fmt.Println(key, fresh, err)
	}
	// Output:
	// tx:a true <nil>
	// tx:b true <nil>
	// tx:a false <nil>
	// tx:c false memory store is full: 2 single-use values held, none expired yet (MaxEntries 2)
}
