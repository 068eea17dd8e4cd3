module braid

go 1.26.0

require golang.org/x/sys v0.50.0

require github.com/ardanlabs/jinja v1.8.0
