package main

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"

	"github.com/extauth/extauth"
)

func (c *cli) metadata(_ context.Context, args []string) int {
	f := c.newFlags("metadata", "-config FILE -base-url URL [-env ENV] [-tenant NAME]",
		`Prints the SAML service-provider metadata XML to give the IdP: the entity ID
(saml_sp_entity_id), the Assertion Consumer Service (the base URL plus
/users/auth/saml/callback, HTTP-POST), and the certificate of
saml_additional_settings when the key pair is configured. It is built exactly
as the application serves it, and needs no network.

With -tenant it prints a tenant's metadata. A tenant's base URL is not in
the file: it is the tenant's name as a subdomain of -base-url, as the
application derives it by default, or -base-url with the name for {tenant},
as in https://app.example.org/{tenant}.

Fails (status 1) when the file does not configure SAML.
`)
	configPath := f.String("config", "", "the secrets file (required)")
	env := f.String("env", "", envHelp)
	tf := addTenantFlags(f, false)
	baseURL := f.String("base-url", "", "the application's external base URL, e.g. https://app.example.org; for a tenant, {tenant} stands for the name (required)")
	if done, code := f.parse(args); done {
		return code
	}
	switch {
	case *configPath == "":
		return f.fail("-config is required")
	case *baseURL == "":
		return f.fail("-base-url is required: the Assertion Consumer Service URL derives from it")
	}
	if ok, code := checkBaseURL(f, *baseURL, tf); !ok {
		return code
	}
	if ok, code := tf.usage(f, *baseURL); !ok {
		return code
	}
	loaded, err := c.load(*configPath, *env, *tf.name)
	if err != nil {
		return c.errorf("metadata", "%s", describeConfigError(err))
	}
	targets, err := tf.targets(loaded, *configPath, *baseURL)
	if err != nil {
		return c.errorf("metadata", "%v", err)
	}
	cfg, base := targets[0].cfg, targets[0].baseURL

	// Only SAML is built: the metadata is its alone, and another provider's
	// trouble is extauth check's business.
	key := make([]byte, 32)
	rand.Read(key)
	a, err := extauth.New(&extauth.Config{SAML: cfg.SAML}, extauth.Options{
		BaseURL:   base,
		CookieKey: key,
		Logger:    slog.New(slog.DiscardHandler),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
	})
	if err != nil {
		return c.errorf("metadata", "%v", err)
	}
	defer a.Close()
	doc, err := a.SAMLMetadata()
	switch {
	case errors.Is(err, extauth.ErrNotConfigured):
		where := *configPath
		if targets[0].tenant != "" {
			where = "tenant " + targets[0].tenant + " of " + where
		}
		return c.errorf("metadata", "saml is not configured in %s: set saml_sp_entity_id and saml_idp_metadata_url", where)
	case err != nil:
		return c.errorf("metadata", "%v", err)
	}
	c.stdout.Write(doc)
	if len(doc) > 0 && doc[len(doc)-1] != '\n' {
		c.stdout.Write([]byte("\n"))
	}
	return exitOK
}
