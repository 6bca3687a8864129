package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/pgstore"
)

// Every instance builds its Store on the pool it already has and hands it
// to extauth.New; Migrate creates the table unless the operator's own
// migrations do.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // stops the sweeper of expired rows
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{
		Key: "client-id", Secret: extauth.NewSecret("client-secret"), Site: "https://blog.example.org",
	}}, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: bytes.Repeat([]byte{7}, 32), // 32 random bytes, the same on every instance
		Store:     store,
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
}

// The statements Migrate runs, for a table in a schema of its own.
func ExampleMigrationSQL() {
	fmt.Print(pgstore.MigrationSQL(pgstore.Options{Schema: "auth", Table: "single_use"}))
	// Output:
	// CREATE TABLE IF NOT EXISTS "auth"."single_use" (
	// 	key     text        PRIMARY KEY,
	// 	expires timestamptz NOT NULL
	// );
	// CREATE INDEX IF NOT EXISTS "single_use_expires" ON "auth"."single_use" (expires);
}
