// Package interop holds extauth's tests against independent implementations
// written in other languages. They need the build tag interop and the peers
// installed first:
//
//	interop/samlify/install.sh        # samlify IdP (npm ci)
//	interop/oidcprovider/install.sh   # oidc-provider, a certified OpenID provider (npm ci)
//	interop/pyff/install.sh           # pyFF, the federations' MDQ server (a Python venv from PyPI)
//	interop/spidcieoidc/install.sh    # spid-cie-oidc, Italy's OpenID Federation trust anchor and SPID OP (pip, Python 3)
//	apt-get install xmlsec1 openssl   # independent signature verifiers
//	apt-get install simplesamlphp php-cli php-xml   # SimpleSAMLphp 1.19 IdP, served by php -S
//	apt-get install prometheus        # promtool, for the alert rules of docs/operating.md
//	apt-get install openjdk-17-jre-headless maven   # for Keycloak, then:
//	interop/keycloak/install.sh       # Keycloak's distribution from Maven Central, built and cached
//	go test -tags interop ./interop/...
package interop
