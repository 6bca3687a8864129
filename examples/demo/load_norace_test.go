//go:build !race

package main

// manySignIns is how many sign-ins TestDemoManySignIns makes.
const manySignIns = 1800
