"""Logical ids of the stack's resources, parameters and outputs: the template, the master's user data
and `pedl deploy aws up|down|describe` all name them from here."""

# parameters
MASTER_IMAGE_PARAM = "MasterImageId"
AGENT_IMAGE_PARAM = "AgentImageId"
AZ_PARAM = "AvailabilityZone"  # only when the subnet is given (its zone, for the data volume)

# network
VPC = "Vpc"
SUBNET = "PublicSubnet"
DB_SUBNET_A = "DatabaseSubnetA"
DB_SUBNET_B = "DatabaseSubnetB"
GATEWAY = "InternetGateway"
GATEWAY_ATTACHMENT = "InternetGatewayAttachment"
ROUTE_TABLE = "PublicRouteTable"
DEFAULT_ROUTE = "PublicDefaultRoute"
SUBNET_ROUTES = "PublicSubnetRouteTable"
MASTER_SG = "MasterSecurityGroup"
AGENT_SG = "AgentSecurityGroup"
DB_SG = "DatabaseSecurityGroup"

# IAM
MASTER_ROLE = "MasterRole"
MASTER_PROFILE = "MasterInstanceProfile"
AGENT_ROLE = "AgentRole"
AGENT_PROFILE = "AgentInstanceProfile"

# data
BUCKET = "CheckpointBucket"
DATA_VOLUME = "DataVolume"
DATA_VOLUME_ATTACHMENT = "DataVolumeAttachment"
DB_SECRET = "DatabaseSecret"
DB_SUBNET_GROUP = "DatabaseSubnetGroup"
DATABASE = "Database"

# the master
MASTER = "MasterInstance"
ELASTIC_IP = "MasterElasticIp"
ELASTIC_IP_ASSOCIATION = "MasterElasticIpAssociation"
