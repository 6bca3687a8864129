//go:build race

package main

// manySignIns is how many sign-ins TestDemoManySignIns makes: the race
// detector slows each tenfold.
const manySignIns = 360
