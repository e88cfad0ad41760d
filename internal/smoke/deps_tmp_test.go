package smoke

// Temporary: pins the dependencies the smoke tests will use while they are being written.
import (
	_ "github.com/elastic/go-elasticsearch/v8"
	_ "github.com/elastic/go-elasticsearch/v8/esapi"
	_ "github.com/go-mysql-org/go-mysql/client"
	_ "github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/jackc/pglogrepl"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgconn"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "go.mongodb.org/mongo-driver/v2/bson"
	_ "go.mongodb.org/mongo-driver/v2/mongo"
	_ "go.mongodb.org/mongo-driver/v2/mongo/options"
)
