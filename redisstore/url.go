package redisstore

import (
	"errors"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewFromURL makes a go-redis client from rawURL and returns a Store on it;
// Close closes that client. Like New it does not connect. The scheme picks
// the topology, and go-redis parses the rest, query options included:
//
//   - redis://[user:password@]host[:port][/db][?option=value...] and
//     rediss://... (TLS), unix://[user:password@]/path/to/socket[?db=N]:
//     one server, through redis.ParseURL.
//   - redis+sentinel://[user:password@]host:port[/db]?master_name=NAME[&addr=host:port...][&username=U&password=P]
//     and rediss+sentinel://...: a Sentinel-managed primary, through
//     redis.ParseFailoverURL. The host and each addr are Sentinels; the
//     user and password in the authority are the Sentinels' own, while the
//     data nodes' come from the username and password query options.
//   - redis+cluster://[user:password@]host:port[?addr=host:port...] and
//     rediss+cluster://...: Redis Cluster, through redis.ParseClusterURL,
//     the host and each addr being seed nodes.
//
// go-redis has no scheme of its own for Sentinel or Cluster (its failover
// and cluster parsers take redis:// and rediss://); the "+sentinel" and
// "+cluster" suffixes only choose the parser. Option names are go-redis's
// (dial_timeout, read_timeout, pool_size, max_retries, ...); an unknown
// one is an error. The client respects context deadlines
// (ContextTimeoutEnabled), so a sign-in's deadline bounds its command.
//
// A password with reserved characters (@ : / ? #) must be percent-encoded.
// No error of NewFromURL shows the URL or its passwords.
func NewFromURL(rawURL string, o Options) (*Store, error) {
	c, err := clientFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	s, err := New(c, o)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

func clientFromURL(rawURL string) (redis.UniversalClient, error) {
	// url.Parse's errors quote the whole URL, and a password holding a
	// reserved character can end up in the part they quote: say nothing
	// of the text.
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("redisstore: the Redis URL does not parse (it is not shown, as it may hold a password); percent-encode reserved characters in the password")
	}
	base, topology, _ := strings.Cut(u.Scheme, "+")
	if base != "redis" && base != "rediss" && !(base == "unix" && topology == "") {
		return nil, errors.New("redisstore: the Redis URL's scheme must be redis, rediss or unix, optionally with +sentinel or +cluster after redis or rediss")
	}
	u.Scheme = base
	secrets := urlSecrets(u)
	switch topology {
	case "":
		opt, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, urlError(err, secrets)
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), nil
	case "sentinel":
		opt, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, urlError(err, secrets)
		}
		if opt.MasterName == "" {
			return nil, errors.New("redisstore: a redis+sentinel URL needs the master_name option")
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(opt), nil
	case "cluster":
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, urlError(err, secrets)
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), nil
	}
	return nil, errors.New("redisstore: the Redis URL's scheme must end in +sentinel or +cluster, if it has a +")
}

// urlSecrets are the passwords a URL carries: in its authority and, for
// Sentinel, in its query.
func urlSecrets(u *url.URL) []string {
	var s []string
	if p, ok := u.User.Password(); ok && p != "" {
		s = append(s, p)
	}
	for k, vs := range u.Query() {
		if strings.Contains(k, "password") {
			for _, v := range vs {
				if v != "" {
					s = append(s, v)
				}
			}
		}
	}
	return s
}

// urlError is go-redis's parse error with every password blanked out, and
// not wrapped: the original would show them to whoever unwraps it.
func urlError(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "[REDACTED]")
	}
	return errors.New("redisstore: the Redis URL: " + msg)
}
