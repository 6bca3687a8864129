package extauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// readyPoll is how often Ready looks again at a provider that is not ready.
const readyPoll = 20 * time.Millisecond

// Ready reports whether every provider that needs a document from its
// provider before it can sign anyone in (SAML metadata, OpenID Connect
// discovery) has it, asking for it when it has none, and, for SAML, whether
// the IdP has a signing certificate that has not expired (an expired SP
// certificate does not count: signing goes on), and waits for them until
// ctx is done. It returns nil when all are ready, or an error naming each
// provider that is not, and why. Tests call it instead of polling through
// 503s; ReadyHandler serves it to health checks. It covers the application's
// own providers; TenantReady covers a tenant's.
func (a *Auth) Ready(ctx context.Context) error {
	return siteReady(ctx, a.site)
}

// TenantReady is Ready for the providers of tenant, building the tenant
// first as its first request would (Options.TenantOf): a test that starts
// a tenant's own providers waits with it before signing in there. The
// error wraps ErrUnknownTenant for a tenant that does not exist, and is the
// tenant's configuration problem for one that cannot be built.
func (a *Auth) TenantReady(ctx context.Context, tenant string) error {
	st, err := a.siteNamed(ctx, tenant)
	if err != nil {
		return err
	}
	return siteReady(ctx, st)
}

func siteReady(ctx context.Context, st *site) error {
	var errs []error
	for _, name := range st.order {
		if err := waitReady(ctx, st.strategies[name]); err != nil {
			errs = append(errs, &notReady{provider: name, err: err})
		}
	}
	if len(errs) > 0 {
		if st.tenant != "" {
			return fmt.Errorf("extauth: tenant %s not ready: %w", st.tenant, errors.Join(errs...))
		}
		return fmt.Errorf("extauth: not ready: %w", errors.Join(errs...))
	}
	return nil
}

// notReady is why one provider is not ready: "oidc: misconfigured: ...".
// A strategy's *providers.Error already reads "extauth: oidc: ...", which
// the prefix of Ready's error says once.
type notReady struct {
	provider string
	err      error
}

func (e *notReady) Error() string {
	msg := strings.TrimPrefix(e.err.Error(), "extauth: ")
	if strings.HasPrefix(msg, e.provider+": ") {
		return msg
	}
	return e.provider + ": " + msg
}

func (e *notReady) Unwrap() error { return e.err }

// waitReady waits for one strategy: OpenID Connect's Discover, or SAML's
// metadata, which its background refresh fetches, with an IdP signing
// certificate that has not expired.
func waitReady(ctx context.Context, s Strategy) error {
	var check func() error
	switch s := s.(type) {
	case interface{ Discover(context.Context) error }:
		check = func() error { return s.Discover(ctx) }
	case interface{ ReadyError() error }:
		check = s.ReadyError
	default:
		return nil
	}
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
	}
}

// ReadyHandler answers health checks with Ready: 200 "ready", or 503 and the
// providers that are not, waiting at most 5 seconds.
func (a *Auth) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := a.Ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}
