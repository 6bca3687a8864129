package enterprise

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// GraphEndpoint names an endpoint of the fake Microsoft Graph, for
// SetFault and Calls.
type GraphEndpoint string

// The endpoints.
const (
	// MemberOf is /v1.0/me/memberOf and /v1.0/me/transitiveMemberOf.
	MemberOf GraphEndpoint = "memberOf"
	// UserInfo is /oidc/userinfo, Entra ID's UserInfo endpoint.
	UserInfo GraphEndpoint = "userinfo"
)

// Fault is a way an endpoint misbehaves.
type Fault = endpoint.Fault

// The faults.
const (
	FaultNone        = endpoint.None
	FaultServerError = endpoint.ServerError
	// FaultHang answers nothing until the client gives up.
	FaultHang      = endpoint.Hang
	FaultHugeBody  = endpoint.HugeBody
	FaultMalformed = endpoint.Malformed
)

// graphReadScopes are the delegated permissions with which Graph lists a
// user's memberships to the user's own token.
var graphReadScopes = []string{"GroupMember.Read.All", "Group.Read.All", "Directory.Read.All", "Group.ReadWrite.All", "Directory.ReadWrite.All"}

// defaultPageSize is the page Graph answers without $top; maxPageSize the
// largest $top it takes.
const (
	defaultPageSize = 100
	maxPageSize     = 999
)

// Graph is a fake Microsoft Graph for the fake Entra ID's tokens: the
// user's memberships (/v1.0/me/memberOf, /v1.0/me/transitiveMemberOf),
// paged with @odata.nextLink as Graph pages them, for a token whose
// scopes allow it, and UserInfo (/oidc/userinfo). It is an http.Handler.
type Graph struct {
	e      *Entra
	faults endpoint.Faults[GraphEndpoint]

	mu sync.Mutex
	// foreignNext, when set, is the base the next pages' links name in
	// place of Graph's own.
	foreignNext string
	// denied makes every token's memberships refused, as when the
	// permission was asked for but an administrator never consented.
	denied bool
}

func newGraph(e *Entra) *Graph {
	g := &Graph{e: e}
	g.faults.ServerError = func(w http.ResponseWriter) {
		graphError(w, http.StatusServiceUnavailable, "serviceNotAvailable", "Service unavailable")
	}
	g.faults.Huge = endpoint.Huge{ContentType: "application/json", Prefix: `{"value":[{"id":"`, Fill: 'a', Suffix: `"}]}`}
	g.faults.Malformed = endpoint.Body{ContentType: "text/html", Text: "<html><body>The service is unavailable.</body></html>"}
	return g
}

// SetFault makes an endpoint misbehave; FaultNone restores it.
func (g *Graph) SetFault(e GraphEndpoint, f Fault) { g.faults.Set(e, f) }

// Calls reports how many requests reached an endpoint.
func (g *Graph) Calls(e GraphEndpoint) int { return g.faults.Calls(e) }

// Close ends every hanging request.
func (g *Graph) Close() { g.faults.Close() }

// SetForeignNextLink makes the next pages' @odata.nextLink name base (a
// server that is not Graph) instead of Graph; "" restores them.
func (g *Graph) SetForeignNextLink(base string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.foreignNext = base
}

// SetConsentMissing makes Graph refuse every membership listing with
// Authorization_RequestDenied, as when the application asks for a
// permission an administrator has not consented to.
func (g *Graph) SetConsentMissing(missing bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denied = missing
}

// ServeHTTP serves Graph's paths.
func (g *Graph) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1.0/me/memberOf":
		g.memberOf(w, r, false)
	case "/v1.0/me/transitiveMemberOf":
		g.memberOf(w, r, true)
	case "/oidc/userinfo":
		g.userinfo(w, r)
	default:
		graphError(w, http.StatusBadRequest, "BadRequest", "Resource not found for the segment '"+strings.TrimPrefix(r.URL.Path, "/")+"'.")
	}
}

func graphError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": message,
		"innerError": map[string]any{"request-id": endpoint.Random(8), "client-request-id": endpoint.Random(8)}}})
}

// account reads the bearer token and finds its user; it answers the
// error itself when it cannot.
func (g *Graph) account(w http.ResponseWriter, r *http.Request) (entraAccount, []string, bool) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty.")
		return entraAccount{}, nil, false
	}
	acct, scope, ok := g.e.introspect(token)
	if !ok {
		graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token validation failure. Invalid audience.")
		return entraAccount{}, nil, false
	}
	var scopes []string
	for _, s := range strings.Fields(scope) {
		scopes = append(scopes, strings.TrimPrefix(s, "https://graph.microsoft.com/"))
	}
	return acct, scopes, true
}

func (g *Graph) memberOf(w http.ResponseWriter, r *http.Request, transitive bool) {
	if !g.faults.Enter(w, r, MemberOf) {
		return
	}
	acct, scopes, ok := g.account(w, r)
	if !ok {
		return
	}
	g.mu.Lock()
	denied, foreign := g.denied, g.foreignNext
	g.mu.Unlock()
	if denied || !slices.ContainsFunc(scopes, func(s string) bool {
		return slices.ContainsFunc(graphReadScopes, func(p string) bool { return strings.EqualFold(p, s) })
	}) {
		graphError(w, http.StatusForbidden, "Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
		return
	}
	q := r.URL.Query()
	size := defaultPageSize
	if top := q.Get("$top"); top != "" {
		n, err := strconv.Atoi(top)
		if err != nil || n < 1 || n > maxPageSize {
			graphError(w, http.StatusBadRequest, "Request_UnsupportedQuery", "Invalid page size specified: '"+top+"'. Must be between 1 and 999 inclusive.")
			return
		}
		size = n
	}
	skip := 0
	if tok := q.Get("$skiptoken"); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "X'"))
		if err != nil || n < 0 {
			graphError(w, http.StatusBadRequest, "Directory_ExpiredPageToken", "The specified page token value has expired and can no longer be included in your request.")
			return
		}
		skip = n
	}
	type object struct {
		Type string `json:"@odata.type"`
		ID   string `json:"id"`
	}
	var all []object
	u := acct.user
	groups := slices.Clone(u.Groups)
	if transitive {
		groups = append(groups, u.NestedGroups...)
	}
	for _, id := range groups {
		all = append(all, object{"#microsoft.graph.group", id})
	}
	for _, wid := range u.WIDs {
		// memberOf lists the user's directory roles beside the groups,
		// by the role's object ID, which is not its template's.
		sum := sha256.Sum256([]byte(acct.tenant + wid))
		all = append(all, object{"#microsoft.graph.directoryRole", fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])})
	}
	base := strings.TrimSuffix(g.e.cfg.GraphURL, "/")
	answer := map[string]any{"@odata.context": base + "/v1.0/$metadata#directoryObjects(id)"}
	end := min(skip+size, len(all))
	page := []object{}
	if skip < len(all) {
		page = all[skip:end]
	}
	answer["value"] = page
	if end < len(all) {
		next := base
		if foreign != "" {
			next = strings.TrimSuffix(foreign, "/")
		}
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("$skiptoken", "X'"+strconv.Itoa(end))
		answer["@odata.nextLink"] = next + r.URL.Path + "?" + nq.Encode()
	}
	w.Header().Set("Content-Type", "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8")
	json.NewEncoder(w).Encode(answer)
}

// userinfo is Entra ID's UserInfo: the sub of the ID token, the name and
// email, and a picture at Graph.
func (g *Graph) userinfo(w http.ResponseWriter, r *http.Request) {
	if !g.faults.Enter(w, r, UserInfo) {
		return
	}
	acct, scopes, ok := g.account(w, r)
	if !ok {
		return
	}
	if !slices.Contains(scopes, "openid") {
		graphError(w, http.StatusForbidden, "Authorization_RequestDenied", "Insufficient privileges to complete the operation.")
		return
	}
	u := acct.user
	claims := map[string]any{"sub": u.Sub, "picture": strings.TrimSuffix(g.e.cfg.GraphURL, "/") + "/v1.0/me/photo/$value"}
	if slices.Contains(scopes, "profile") {
		claims["name"], claims["given_name"], claims["family_name"] = u.Name, u.GivenName, u.FamilyName
	}
	if slices.Contains(scopes, "email") && u.Email != "" {
		claims["email"] = u.Email
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(claims)
}
