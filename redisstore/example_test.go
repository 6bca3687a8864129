package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/redisstore"
)

// Every instance builds its own Store for the same Redis and hands it to
// extauth.New. New does not connect: the first sign-in does, or Ping, for a
// check at start-up.
func Example() {
	store, err := redisstore.New("redis.internal:6379", redisstore.Options{
		// In production: extauth.NewSecret(os.Getenv("REDIS_PASSWORD")).
		Password: extauth.NewSecret("s3cret-from-the-environment"),
		DB:       2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	fmt.Println(store) // the password never prints

	cfg := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{
		Key: "client-id", Secret: extauth.NewSecret("client-secret"), Site: "https://blog.example.org",
	}}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: bytes.Repeat([]byte{7}, 32), // 32 random bytes, the same on every instance
		Store:     store,
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	fmt.Println(a.Providers())

	_, err = redisstore.New("redis.internal", redisstore.Options{})
	fmt.Println(err)
	// Output:
	// redisstore redis.internal:6379 db 2 prefix "extauth:" tls false password [REDACTED]
	// [blog_oauth2]
	// redisstore: address "redis.internal": address redis.internal: missing port in address
}

// docs/several-instances.md: each instance builds its store, checks Redis at
// start-up, and hands the store to extauth.New. Compiled, not run: it needs a
// Redis at redis.internal.
func ExampleStore_Ping() {
	ctx := context.Background()
	cfg := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{
		Key: "client-id", Secret: extauth.NewSecret("client-secret"), Site: "https://blog.example.org",
	}}
	key := bytes.Repeat([]byte{7}, 32)
	onSuccess := func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
		http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
	}

	store, err := redisstore.New("redis.internal:6379", redisstore.Options{
		Password: extauth.NewSecret(os.Getenv("REDIS_PASSWORD")),
	})
	if err != nil {
		log.Fatal(err) // bad options only: New does not connect
	}
	defer store.Close()
	if err := store.Ping(ctx); err != nil { // optional: fail at start-up, not at the first sign-in
		log.Fatal(err)
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: key, // the same on every instance
		Store:     store,
		OnSuccess: onSuccess,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
}
