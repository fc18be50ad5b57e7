package scenes

// A scene's body (Scene, SceneApply), its limits, its then values and its
// rules are the board API's: they live in bus/boardapi, so the gateway
// checks a scene as the board does.

// Values of by in scene_ended.
const (
	ByClip     = "clip"
	ByTime     = "time"
	ByEnd      = "end"
	ByReplaced = "replaced"
)
