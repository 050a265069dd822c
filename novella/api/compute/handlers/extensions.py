"""/extensions: the v2.1 API's frozen list of the extensions it grew from.

Microversions replaced extensions; the list stays as the reference keeps it
(every alias and name of the v2.1 API, one update date, no links), for the
clients that still read it. The descriptions here are Novella's own words.
"""
from novella.api.compute import errors

P = "os_compute_api:extensions"
_UPDATED = "2014-12-03T00:00:00Z"
_NAMESPACE = "http://docs.openstack.org/compute/ext/fake_xml"

# alias name, one per line: the v2.1 API's extensions.
_LIST = """
NMN Multinic
OS-DCF DiskConfig
OS-EXT-AZ ExtendedAvailabilityZone
OS-EXT-IMG-SIZE ImageSize
OS-EXT-IPS ExtendedIps
OS-EXT-IPS-MAC ExtendedIpsMac
OS-EXT-SRV-ATTR ExtendedServerAttributes
OS-EXT-STS ExtendedStatus
OS-FLV-DISABLED FlavorDisabled
OS-FLV-EXT-DATA FlavorExtraData
OS-SCH-HNT SchedulerHints
OS-SRV-USG ServerUsage
os-access-ips AccessIPs
os-admin-actions AdminActions
os-admin-password AdminPassword
os-agents Agents
os-aggregates Aggregates
os-assisted-volume-snapshots AssistedVolumeSnapshots
os-attach-interfaces AttachInterfaces
os-availability-zone AvailabilityZone
os-baremetal-ext-status BareMetalExtStatus
os-baremetal-nodes BareMetalNodes
os-block-device-mapping BlockDeviceMapping
os-block-device-mapping-v2-boot BlockDeviceMappingV2Boot
os-cell-capacities CellCapacities
os-cells Cells
os-certificates Certificates
os-cloudpipe Cloudpipe
os-cloudpipe-update CloudpipeUpdate
os-config-drive ConfigDrive
os-console-auth-tokens ConsoleAuthTokens
os-console-output ConsoleOutput
os-consoles Consoles
os-create-backup CreateBackup
os-create-server-ext Createserverext
os-deferred-delete DeferredDelete
os-evacuate Evacuate
os-extended-evacuate-find-host ExtendedEvacuateFindHost
os-extended-floating-ips ExtendedFloatingIps
os-extended-hypervisors ExtendedHypervisors
os-extended-networks ExtendedNetworks
os-extended-quotas ExtendedQuotas
os-extended-rescue-with-image ExtendedRescueWithImage
os-extended-services ExtendedServices
os-extended-services-delete ExtendedServicesDelete
os-extended-status ExtendedStatus
os-extended-volumes ExtendedVolumes
os-fixed-ips FixedIPs
os-flavor-access FlavorAccess
os-flavor-extra-specs FlavorExtraSpecs
os-flavor-manage FlavorManage
os-flavor-rxtx FlavorRxtx
os-flavor-swap FlavorSwap
os-floating-ip-dns FloatingIpDns
os-floating-ip-pools FloatingIpPools
os-floating-ips FloatingIps
os-floating-ips-bulk FloatingIpsBulk
os-fping Fping
os-hide-server-addresses HideServerAddresses
os-hosts Hosts
os-hypervisor-status HypervisorStatus
os-hypervisors Hypervisors
os-instance-actions InstanceActions
os-instance_usage_audit_log OSInstanceUsageAuditLog
os-keypairs Keypairs
os-lock-server LockServer
os-migrate-server MigrateServer
os-migrations Migrations
os-multiple-create MultipleCreate
os-networks Networks
os-networks-associate NetworkAssociationSupport
os-pause-server PauseServer
os-personality Personality
os-preserve-ephemeral-rebuild PreserveEphemeralOnRebuild
os-quota-class-sets QuotaClasses
os-quota-sets Quotas
os-rescue Rescue
os-security-group-default-rules SecurityGroupDefaultRules
os-security-groups SecurityGroups
os-server-diagnostics ServerDiagnostics
os-server-external-events ServerExternalEvents
os-server-group-quotas ServerGroupQuotas
os-server-groups ServerGroups
os-server-list-multi-status ServerListMultiStatus
os-server-password ServerPassword
os-server-sort-keys ServerSortKeys
os-server-start-stop ServerStartStop
os-services Services
os-shelve Shelve
os-simple-tenant-usage SimpleTenantUsage
os-suspend-server SuspendServer
os-tenant-networks OSTenantNetworks
os-used-limits UsedLimits
os-used-limits-for-admin UsedLimitsForAdmin
os-user-data UserData
os-user-quotas UserQuotas
os-virtual-interfaces VirtualInterfaces
os-volume-attachment-update VolumeAttachmentUpdate
os-volumes Volumes
"""
EXTENSIONS = [{"alias": alias, "name": name, "description": f"The {name} extension.",
               "namespace": _NAMESPACE, "updated": _UPDATED, "links": []}
              for alias, name in (line.split() for line in _LIST.split("\n") if line)]


def index(req):
    req.authorize(P, {})
    return 200, {"extensions": EXTENSIONS}


def show(req, alias):
    req.authorize(P, {})
    for ext in EXTENSIONS:
        if ext["alias"] == alias:
            return 200, {"extension": ext}
    raise errors.NotFound("The resource could not be found.")


ROUTES = [
    ("GET", "/extensions", index),
    ("GET", "/extensions/{alias}", show),
]
