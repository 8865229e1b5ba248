"""One broker's security parts, as the handlers see them, and their builder.

The authorizer (Kafka's ``StandardAuthorizer`` when ``authorizer.class.name`` names it, else
None: every request allowed) over the cluster's ACLs, the ACLs themselves (the ACL APIs
change them), the cluster's SCRAM credentials (Describe/AlterUserScramCredentials, SCRAM
logins) and delegation tokens (the token APIs, 38-41; None: off). The stores are the
cluster's, shared by every broker; the authorizer is this broker's view of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.config.broker_config import BrokerConfig
from broker.security.authorizer.acl_store import AclStore
from broker.security.authorizer.standard_authorizer import StandardAuthorizer, parse_super_users
from broker.security.delegation_token_manager import DelegationTokenManager
from broker.security.scram_credentials import ScramCredentialStore


@dataclass(frozen=True, slots=True)
class BrokerSecurity:
    """The authorizer (None: everything allowed), the cluster's ACLs and SCRAM credentials."""

    authorizer: StandardAuthorizer | None = None
    acls: AclStore = field(default_factory=AclStore)
    scram_credentials: ScramCredentialStore = field(default_factory=ScramCredentialStore)
    delegation_tokens: DelegationTokenManager | None = None


def build_authorizer(config: BrokerConfig, acls: AclStore) -> StandardAuthorizer | None:
    """Kafka's StandardAuthorizer over the cluster's ACLs when ``authorizer.class.name``
    names it; None (every request allowed) otherwise."""
    if not config.authorizer_class_name:
        return None
    return StandardAuthorizer(
        acls, parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found
    )


def build_security(
    config: BrokerConfig,
    acls: AclStore,
    scram_credentials: ScramCredentialStore,
    delegation_tokens: DelegationTokenManager | None = None,
) -> BrokerSecurity:
    """The broker's security parts over the cluster's ACLs, SCRAM credentials and tokens."""
    return BrokerSecurity(
        build_authorizer(config, acls), acls, scram_credentials, delegation_tokens
    )
