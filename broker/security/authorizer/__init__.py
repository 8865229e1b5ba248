"""Kafka 4's StandardAuthorizer: ACLs, their store, and the one question handlers ask.

``acl.py`` is the model (Kafka's ``AclBinding``, ``AclBindingFilter`` and their enums),
``acl_store.py`` the cluster's ACLs (Kafka's ``AclControlManager``: validation, create,
delete, durable as ``acls.json``), ``standard_authorizer.py`` the matcher
(``StandardAuthorizerData``: super users, DENY before ALLOW, implied operations, the
no-ACL default) and ``authorization.py`` what a handler calls (Kafka's ``AuthHelper``).
"""
