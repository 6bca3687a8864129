// Command extauth is the operator's tool for applications that use extauth:
// it generates the SAML service-provider key pair, checks a secrets file
// against the providers it names, lists the routes and the callback URL to
// register with each provider, and prints the SAML service-provider metadata.
//
//	go install github.com/extauth/extauth/cmd/extauth@latest
//	extauth keygen -name myapp
//	extauth check -config config/secrets.yml -env production
//	extauth routes -config config/secrets.yml -base-url https://app.example.org
//	extauth metadata -config config/secrets.yml -base-url https://app.example.org
//	extauth version
//
// Exit status: 0 on success, 1 when a check finds errors or an operation
// fails, 2 on a usage error. Run "extauth <command> -h" for the flags.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
