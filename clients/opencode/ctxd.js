// ctxd's plugin for OpenCode: the family's (clients/opencode_family/plugin.js), for OpenCode.
// `ctxd install opencode` names this file in opencode.json.
import { ctxdPlugin } from "../opencode_family/plugin.js"

export const CtxdPlugin = ctxdPlugin("opencode")
