module github.com/arkadiuss/openfief/sdk/go

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/go-jose/go-jose/v4 v4.1.9
	google.golang.org/protobuf v1.36.12
)
