package redisstore_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/redisstore"
)

// Every instance builds its own Store on its own client for the same Redis
// and hands it to extauth.New. Neither connects: the first sign-in does, or
// Ping, for a check at start-up.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "redis.internal:6379",
		Username:              "extauth", // an ACL user that may only SET and PING
		Password:              os.Getenv("REDIS_PASSWORD"),
		ReadTimeout:           time.Second,
		ContextTimeoutEnabled: true, // the sign-in's deadline bounds each command
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		panic(err)
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
		panic(err)
	}
	defer a.Close()
	// Output:
}

// With Sentinel, the failover client follows the primary, and WaitReplicas
// keeps a failover from losing a used key.
func Example_sentinel() {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
		Password:              os.Getenv("REDIS_PASSWORD"),
		ReadTimeout:           2 * time.Second,
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Options{WaitReplicas: 1, WaitTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	_ = store // extauth.Options{Store: store, ...}
	// Output:
}

// With Redis Cluster, each key goes to the primary of its slot.
func Example_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		Password:              os.Getenv("REDIS_PASSWORD"),
		ReadTimeout:           time.Second,
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	_ = store // extauth.Options{Store: store, ...}
	// Output:
}

// From a URL, say REDIS_URL=rediss://extauth:PASSWORD@redis.internal:6380/0;
// the store makes the client and closes it. No error shows the URL.
func ExampleNewFromURL() {
	store, err := redisstore.NewFromURL("rediss://extauth:s3cret@redis.internal:6380/0?read_timeout=1s", redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	fmt.Println(store)

	_, err = redisstore.NewFromURL("redis://extauth:s3cret/with-a-slash@redis.internal", redisstore.Options{})
	fmt.Println(err)
	// Output:
	// redisstore redis.internal:6380 db 0 tls true user "extauth" password [REDACTED] prefix "extauth:"
	// redisstore: the Redis URL does not parse (it is not shown, as it may hold a password); percent-encode reserved characters in the password
}
