"""The CloudFormation template of a pedl cluster on AWS, as a dict (pure: options in, template out):
network, security groups, IAM, the checkpoint bucket, the master instance with its data volume, the
database with db=rds, an optional Elastic IP, and outputs. `print-template` prints it as YAML.

AMIs come from SSM public parameters, which CloudFormation resolves in the stack's own region: the
master runs Ubuntu 24.04 (Python 3.12), the agents the AWS Deep Learning Base GPU AMI (Ubuntu 24.04,
NVIDIA driver and CUDA installed) unless --agent-ami names one. `up` pins the master's: it resolves the
parameter once, at the stack's creation, and passes that image id ever after, since a new image would
replace the master instance while its data volume is attached (an update fails with VolumeInUse)."""

from __future__ import annotations

from typing import Any

import yaml

from pedl.deploy import logical_ids as ids
from pedl.deploy.master_user_data import master_user_data, user_data_variables
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_database import database_resources
from pedl.deploy.template_iam import iam_resources
from pedl.deploy.template_network import (
    availability_zone,
    network_resources,
    security_group_resources,
    subnet_id,
    vpc_id,
)
from pedl.deploy.template_parts import get_att, placeholder, ref, retained, sub, tags

MASTER_AMI_PARAMETER = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
AGENT_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
SSM_IMAGE_TYPE = "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
DATA_VOLUME_GB = 100  # the seeds: at least 100 GB for the master's metadata
MASTER_ROOT_GB = 30
ROOT_DEVICE = "/dev/sda1"  # Ubuntu's


def _parameters(options: DeployOptions, master_image_id: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        ids.MASTER_IMAGE_PARAM: {
            "Type": SSM_IMAGE_TYPE,
            "Default": MASTER_AMI_PARAMETER,
            "Description": "SSM parameter naming the master's AMI (Ubuntu 24.04)",
        },
    }
    if master_image_id:
        params[ids.MASTER_IMAGE_PARAM] = {
            "Type": "AWS::EC2::Image::Id",
            "Default": master_image_id,
            "Description": "the master's AMI (Ubuntu 24.04), pinned when the stack was created",
        }
    if options.agent_ami:
        params[ids.AGENT_IMAGE_PARAM] = {
            "Type": "AWS::EC2::Image::Id",
            "Default": options.agent_ami,
            "Description": "the agents' AMI",
        }
    else:
        params[ids.AGENT_IMAGE_PARAM] = {
            "Type": SSM_IMAGE_TYPE,
            "Default": AGENT_AMI_PARAMETER,
            "Description": "SSM parameter naming the agents' AMI (AWS Deep Learning Base GPU AMI, Ubuntu 24.04)",
        }
    if not options.creates_network:
        az: dict[str, Any] = {
            "Type": "AWS::EC2::AvailabilityZone::Name",
            "Description": f"the availability zone of subnet {options.subnet_id}",
        }
        if options.availability_zone:
            az["Default"] = options.availability_zone
        params[ids.AZ_PARAM] = az
    return params


def _storage(options: DeployOptions) -> dict[str, Any]:
    """The checkpoint bucket and the master's data volume: both kept when the stack goes."""
    name = f"pedl-{options.cluster_id}"
    return {
        ids.BUCKET: retained(
            {
                "Type": "AWS::S3::Bucket",
                "Properties": {
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    },
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
                    "Tags": tags(options, f"{name}-checkpoints"),
                },
            }
        ),
        # A volume of its own (not the instance's block device mapping), so that replacing or upgrading
        # the instance keeps it; in the subnet's zone, which the instance's placement follows.
        ids.DATA_VOLUME: retained(
            {
                "Type": "AWS::EC2::Volume",
                "Properties": {
                    "AvailabilityZone": availability_zone(options),
                    "Size": DATA_VOLUME_GB,
                    "VolumeType": "gp3",
                    "Encrypted": True,
                    "Tags": tags(options, f"{name}-master-data"),
                },
            }
        ),
        ids.DATA_VOLUME_ATTACHMENT: {
            "Type": "AWS::EC2::VolumeAttachment",
            "Properties": {"InstanceId": ref(ids.MASTER), "VolumeId": ref(ids.DATA_VOLUME), "Device": "/dev/sdf"},
        },
    }


def _master(options: DeployOptions, wheel_sha256: str | None = None) -> dict[str, Any]:
    instance: dict[str, Any] = {
        "Type": "AWS::EC2::Instance",
        "Properties": {
            "ImageId": ref(ids.MASTER_IMAGE_PARAM),
            "InstanceType": options.master_instance_type,
            "KeyName": options.keypair,
            "IamInstanceProfile": ref(ids.MASTER_PROFILE),
            "NetworkInterfaces": [
                {
                    "DeviceIndex": "0",
                    "SubnetId": subnet_id(options),
                    "AssociatePublicIpAddress": True,
                    "GroupSet": [get_att(ids.MASTER_SG, "GroupId")],
                }
            ],
            "BlockDeviceMappings": [
                {
                    "DeviceName": ROOT_DEVICE,
                    "Ebs": {
                        "VolumeSize": MASTER_ROOT_GB,
                        "VolumeType": "gp3",
                        "Encrypted": True,
                        "DeleteOnTermination": True,
                    },
                }
            ],
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
            "UserData": {
                "Fn::Base64": {
                    "Fn::Sub": [master_user_data(options, wheel_sha256=wheel_sha256), user_data_variables(options)]
                }
            },
            "Tags": tags(options, f"pedl-{options.cluster_id}-master"),
        },
    }
    if options.creates_network:
        instance["DependsOn"] = [ids.DEFAULT_ROUTE, ids.SUBNET_ROUTES]  # it installs pedl as it boots
    out = {ids.MASTER: instance}
    if options.elastic_ip:
        # the association is a resource of its own so that the address exists before the instance, whose
        # user data puts it in the TLS certificate
        eip: dict[str, Any] = {
            "Type": "AWS::EC2::EIP",
            "Properties": {"Domain": "vpc", "Tags": tags(options, f"pedl-{options.cluster_id}-master")},
        }
        if options.creates_network:
            eip["DependsOn"] = ids.GATEWAY_ATTACHMENT
        out[ids.ELASTIC_IP] = eip
        out[ids.ELASTIC_IP_ASSOCIATION] = {
            "Type": "AWS::EC2::EIPAssociation",
            "Properties": {"AllocationId": get_att(ids.ELASTIC_IP, "AllocationId"), "InstanceId": ref(ids.MASTER)},
        }
    return out


def _outputs(options: DeployOptions) -> dict[str, Any]:
    public = ref(ids.ELASTIC_IP) if options.elastic_ip else get_att(ids.MASTER, "PublicIp")
    tag_key, tag_value = options.tag_pair
    outputs: dict[str, Any] = {
        "MasterUrl": {
            "Description": "the master's API and WebUI",
            "Value": {"Fn::Join": ["", [f"{options.scheme}://", public, f":{options.port}"]]},
        },
        "MasterPublicIp": {"Value": public},
        "MasterPrivateIp": {"Value": get_att(ids.MASTER, "PrivateIp")},
        "MasterInstanceId": {"Value": ref(ids.MASTER)},
        "DataVolumeId": {"Description": "the master's data volume (kept on delete)", "Value": ref(ids.DATA_VOLUME)},
        "CheckpointBucket": {"Description": "checkpoints (kept on delete)", "Value": ref(ids.BUCKET)},
        "MasterSecurityGroupId": {"Value": get_att(ids.MASTER_SG, "GroupId")},
        "AgentSecurityGroupId": {"Value": get_att(ids.AGENT_SG, "GroupId")},
        "AgentRoleArn": {"Value": get_att(ids.AGENT_ROLE, "Arn")},
        "AgentInstanceProfileArn": {"Value": get_att(ids.AGENT_PROFILE, "Arn")},
        "MasterRoleArn": {"Value": get_att(ids.MASTER_ROLE, "Arn")},
        "VpcId": {"Value": vpc_id(options)},
        "SubnetId": {"Value": subnet_id(options)},
        "ClusterId": {"Value": options.cluster_id},
        "TagKey": {"Description": "every resource of the cluster, and its agents, carry this tag", "Value": tag_key},
        "TagValue": {"Value": tag_value},
        "PedlVersion": {"Value": options.pedl_version},
    }
    if options.db == "rds":
        outputs["DatabaseEndpoint"] = {"Value": get_att(ids.DATABASE, "Endpoint.Address")}
        outputs["DatabaseSecretArn"] = {
            "Description": "the database login's secret (its ARN, not its value)",
            "Value": ref(ids.DB_SECRET),
        }
    if options.tls:
        from pedl.deploy.master_boot import CA_KEY

        outputs["CaCertificateUrl"] = {
            "Description": "the CA the CLI and agents verify the master with",
            "Value": sub(f"s3://{placeholder(ids.BUCKET)}/{CA_KEY}"),
        }
    return outputs


def build_template(
    options: DeployOptions, *, master_image_id: str | None = None, wheel_sha256: str | None = None
) -> dict[str, Any]:
    """The template for these options. `master_image_id` pins the master's AMI (else the SSM parameter's
    image at each deploy); `wheel_sha256` is the digest of the wheel `up` uploads, which the master checks."""
    resources: dict[str, Any] = {}
    for part in (network_resources, security_group_resources, iam_resources, database_resources, _storage):
        resources.update(part(options))
    resources.update(_master(options, wheel_sha256))
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"pedl cluster {options.cluster_id} (pedl {options.pedl_version}), made by pedl deploy aws",
        "Metadata": {
            "pedl": {
                "cluster_id": options.cluster_id,
                "version": options.pedl_version,
                "db": options.db,
                "spot": options.spot,
                "tls": options.tls,
                "elastic_ip": options.elastic_ip,
            }
        },
        "Parameters": _parameters(options, master_image_id),
        "Resources": resources,
        "Outputs": _outputs(options),
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # CloudFormation refuses YAML aliases


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:  # the user data, readable as a block
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def template_yaml(template: dict[str, Any]) -> str:
    return yaml.dump(template, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
