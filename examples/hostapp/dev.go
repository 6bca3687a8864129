package main

import (
	"fmt"
	"io"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// Development mode: without a secrets file the application signs in
// against fake providers that speak the real protocols, started by
// extauthtest on 127.0.0.1 and registered for this application's callback
// URLs, each with its login or consent page; and with extauthtest's
// developer provider, a form that asks for a name and an email. Nothing
// here can run in production: the developer provider refuses any
// BaseURL that is not a loopback address, and the fakes exist only in
// this process.

// developerProvider is the developer provider's slug.
const developerProvider = extauthtest.Developer

// startDevProviders starts the fake providers for the application at base
// and prints where each runs.
func startDevProviders(base string, out io.Writer) (*extauthtest.Providers, error) {
	fakes, err := extauthtest.StartProviders(base, extauthtest.ProvidersOptions{Interactive: true, SAMLKeyPair: true})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "development providers (fakes, offline):")
	for _, p := range extauth.BuiltinProviders() {
		fmt.Fprintf(out, "  %-14s %s\n", p, fakes.URL(p))
	}
	return fakes, nil
}

// addDeveloper mounts the developer provider.
func addDeveloper(o *extauth.Options) error {
	return extauthtest.AddDeveloper(o, extauthtest.DeveloperOptions{})
}
