// ctxd's plugin for Kilo CLI: the OpenCode family's (clients/opencode_family/plugin.js), for Kilo.
// `ctxd install kilo` names this file in kilo.json.
import { ctxdPlugin } from "../opencode_family/plugin.js"

export const CtxdPlugin = ctxdPlugin("kilo")
