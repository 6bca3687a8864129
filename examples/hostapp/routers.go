package main

import (
	"net/http"

	"github.com/gorilla/mux"
)

// The same application on the two other routers hosts use most, for
// -router servemux and -router gorilla: only the mounting differs.

// serveMux serves the pages and extauth's routes on net/http's ServeMux.
func (a *app) serveMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.home)
	mux.HandleFunc("GET /account", a.account)
	mux.HandleFunc("POST /signout", a.signOut)
	mux.Handle("GET /healthz", a.auth.ReadyHandler())
	// extauth's routes, at its default prefix /users/auth/.
	a.auth.Mount(mux)
	return mux
}

// gorillaRouter serves the pages and extauth's routes on gorilla/mux.
func (a *app) gorillaRouter() http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/", a.home).Methods(http.MethodGet)
	r.HandleFunc("/account", a.account).Methods(http.MethodGet)
	r.HandleFunc("/signout", a.signOut).Methods(http.MethodPost)
	r.Handle("/healthz", a.auth.ReadyHandler()).Methods(http.MethodGet)
	// extauth's routes, at its default prefix /users/auth/.
	r.PathPrefix("/users/auth/").Handler(a.auth)
	return r
}
