module github.com/fips-go/fips-go/internal/chachapoly/_asm

go 1.26.3

replace github.com/fips-go/fips-go => ../../..

require (
	github.com/fips-go/fips-go v0.0.0-00010101000000-000000000000
	github.com/mmcloughlin/avo v0.6.0
)

require (
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
