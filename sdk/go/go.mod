module github.com/arkadiuss/openfief/sdk/go

go 1.26
